/**
 * The consumer authors' test kit (testing/index.ts): deliveries through the real ingest,
 * a drain through the real worker, rows and tables read back, all as the consumer's own
 * roles; a grant the declaration lacks fails as DB_PERMISSION, with its metric.
 */
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { describe, expect, it } from 'vitest';
import { caseSla } from '../../functions/consumers/case-sla';
import { MetricNames } from '../../functions/lib/metric-names';
import { caseAccepted } from '../../tools/case-events';
import { mskRecord, useTestInbox } from '../../testing';
import { NOTES_GRANTED, NOTES_UNGRANTED, noteWritten, notesConsumer, SETUP_SQL } from '../fixtures/notes-consumer';

const inbox = await useTestInbox({ reset: true });
const sla = inbox.consumer(caseSla);

// A consumer of the test's own, not listed: its table made as its migration would.
await inbox.sql.unsafe(SETUP_SQL);

describe('the consumer test kit', () => {
  it('delivers envelopes through ingest, drains them through the worker, and reads rows and tables as the consumer', async () => {
    const report = await sla.deliver([caseAccepted('case_kit_1', 'evt_kit_1'), caseAccepted('case_kit_2', 'evt_kit_2')]);
    expect(report).toMatchObject({ received: 2, inserted: 2, duplicates: 0, poisoned: 0 });
    expect((await sla.rows()).map((r) => [r.eventId, r.status, r.offset])).toEqual([
      ['evt_kit_1', 'RECEIVED', 0],
      ['evt_kit_2', 'RECEIVED', 1],
    ]);

    expect(await sla.work()).toMatchObject({ claimed: 2, processed: 2, quarantined: 0 });

    expect((await sla.rows()).map((r) => [r.eventId, r.status, r.attempts])).toEqual([
      ['evt_kit_1', 'PROCESSED', 1],
      ['evt_kit_2', 'PROCESSED', 1],
    ]);
    // As the worker role: the columns its declaration grants are readable…
    expect(await sla.query`select case_id from case_core.sla_obligation order by case_id`).toEqual([
      { case_id: 'case_kit_1' },
      { case_id: 'case_kit_2' },
    ]);
    // …and the ones it does not are not.
    await expect(sla.query`select status from case_core.sla_obligation`).rejects.toMatchObject({ code: '42501' });
  });

  it('a redelivery of the same envelopes stores nothing twice', async () => {
    const envelopes = [caseAccepted('case_kit_3', 'evt_kit_3')];
    await sla.deliver(envelopes);
    const again = await sla.deliver(envelopes);
    expect(again).toMatchObject({ received: 1, inserted: 0, duplicates: 1 });
    expect((await sla.rows()).map((r) => r.offset)).toEqual([0]);
  });

  it('stores what is not an envelope as poison, and takes raw MSK records as they are', async () => {
    const report = await sla.deliverRecords([
      mskRecord({ topic: caseSla.topics[0]!, partition: 4, offset: 77, value: 'not json' }),
      mskRecord({ topic: caseSla.topics[0]!, partition: 4, offset: 78, value: caseAccepted('case_kit_4', 'evt_kit_4') }),
    ]);
    expect(report).toMatchObject({ inserted: 1, poisoned: 1 });
    expect(await sla.poison()).toEqual([{ topic: caseSla.topics[0], partition: 4, offset: 77, errorCode: expect.any(String) }]);
    expect(await sla.rows()).toMatchObject([{ eventId: 'evt_kit_4', partition: 4, offset: 78 }]);
  });

  it("runs a consumer of the test's own, provisioned with its grants", async () => {
    const own = notesConsumer(NOTES_GRANTED);
    await inbox.provision([own]);
    const kit = inbox.consumer(own);

    await kit.deliver([noteWritten('k1', 'first'), noteWritten('k2', 'second')]);
    expect(await kit.work()).toMatchObject({ processed: 2 });
    expect(await inbox.sql`select event_id, body from e2e_notes.note order by event_id`).toEqual([
      { event_id: 'k1', body: 'first' },
      { event_id: 'k2', body: 'second' },
    ]);
  });

  it('quarantines a row whose handler lacks a grant as DB_PERMISSION, naming the table, and counts it', async () => {
    // The declaration forgot the SELECT its RETURNING needs.
    const own = notesConsumer(NOTES_UNGRANTED);
    await inbox.provision([own]);
    const kit = inbox.consumer(own);
    const metrics: { name: string; value: number }[] = [];
    const recorder = {
      addMetric: (name: string, _unit: string, value: number) => void metrics.push({ name, value }),
    } as unknown as Metrics;

    await kit.deliver([noteWritten('k3', 'third')]);
    expect(await kit.work({ metrics: recorder })).toMatchObject({ claimed: 1, quarantined: 1, retried: 0 });

    expect(await kit.rows()).toMatchObject([
      {
        eventId: 'k3',
        status: 'QUARANTINED',
        attempts: 1,
        errorCode: 'DB_PERMISSION',
        errorDetail: { sqlState: '42501', deniedOn: 'table note' },
      },
    ]);
    expect(metrics.filter((m) => m.name === MetricNames.PermissionDenied)).toEqual([{ name: MetricNames.PermissionDenied, value: 1 }]);
    expect(await inbox.sql`select count(*)::int as n from e2e_notes.note`).toEqual([{ n: 0 }]);
  });
});
