/**
 * The consumer authors' test kit (testing/index.ts): deliveries through the real ingest,
 * a drain through the real worker, rows and tables read back, all as the consumer's own
 * roles; a grant the declaration lacks fails as DB_PERMISSION, with its metric.
 */
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { caseSla } from '../../functions/consumers/case-sla';
import { DEFAULT_RETENTION, DEFAULT_RETRY, defineHandler, type ConsumerDeclaration } from '../../functions/framework';
import { MetricNames } from '../../functions/lib/metric-names';
import { caseAccepted } from '../../tools/case-events';
import { mskRecord, useTestInbox } from '../../testing';

const inbox = await useTestInbox({ reset: true });
const sla = inbox.consumer(caseSla);

/** A consumer of the kit's own: one row per event in a table of its own, read back with RETURNING. */
function fixture(tables: ConsumerDeclaration['tables']): ConsumerDeclaration {
  return {
    name: 'kit-fixture',
    topics: ['kit.fixture.v1'],
    dialect: 'canonical',
    mode: 'deferred',
    handlers: {
      'kit.noted.v1': {
        1: defineHandler({
          payload: z.object({ note: z.string() }),
          async handle(tx, event) {
            await tx`insert into kit_fixture.noted (event_id, note) values (${event.eventId}, ${event.payload.note})
                     on conflict do nothing returning event_id`;
          },
        }),
      },
    },
    retry: DEFAULT_RETRY,
    retention: DEFAULT_RETENTION,
    tables,
  };
}

function noted(eventId: string, note: string) {
  return {
    eventId,
    eventType: 'kit.noted.v1',
    eventVersion: 1,
    occurredAt: '2026-07-03T09:15:30Z',
    producer: 'kit-test',
    aggregateType: 'note',
    aggregateId: `n-${eventId}`,
    payload: { note },
  };
}

await inbox.sql`create schema kit_fixture`;
await inbox.sql`create table kit_fixture.noted (event_id text primary key, note text not null)`;

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
    const own = fixture({ 'kit_fixture.noted': { insert: true, select: ['event_id'] } });
    await inbox.provision([own]);
    const kit = inbox.consumer(own);

    await kit.deliver([noted('k1', 'first'), noted('k2', 'second')]);
    expect(await kit.work()).toMatchObject({ processed: 2 });
    expect(await inbox.sql`select event_id, note from kit_fixture.noted order by event_id`).toEqual([
      { event_id: 'k1', note: 'first' },
      { event_id: 'k2', note: 'second' },
    ]);
  });

  it('quarantines a row whose handler lacks a grant as DB_PERMISSION, naming the table, and counts it', async () => {
    // The declaration forgot the SELECT its RETURNING needs.
    const own = fixture({ 'kit_fixture.noted': { insert: true } });
    await inbox.provision([own]);
    const kit = inbox.consumer(own);
    const metrics: { name: string; value: number }[] = [];
    const recorder = {
      addMetric: (name: string, _unit: string, value: number) => void metrics.push({ name, value }),
    } as unknown as Metrics;

    await kit.deliver([noted('k3', 'third')]);
    expect(await kit.work({ metrics: recorder })).toMatchObject({ claimed: 1, quarantined: 1, retried: 0 });

    expect(await kit.rows()).toMatchObject([
      {
        eventId: 'k3',
        status: 'QUARANTINED',
        attempts: 1,
        errorCode: 'DB_PERMISSION',
        errorDetail: { sqlState: '42501', deniedOn: 'table noted' },
      },
    ]);
    expect(metrics.filter((m) => m.name === MetricNames.PermissionDenied)).toEqual([{ name: MetricNames.PermissionDenied, value: 1 }]);
    expect(await inbox.sql`select count(*)::int as n from kit_fixture.noted`).toEqual([{ n: 0 }]);
  });
});
