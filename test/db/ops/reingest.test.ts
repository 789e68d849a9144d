import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import type { ConsumerDeclaration } from '../../../functions/framework/types';
import type { KafkaRecord } from '../../../functions/ingest/types';
import { useTestDatabase } from '../../helpers/db';
import { insertPoisonRow } from '../../helpers/factories';
import { ingestFor, PAYMENT_TOPIC, paymentCompleted } from '../ingest/support';
import { work } from '../worker/support';
import { allInboxRows, opsDeps, opsError, run } from './support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const deps = opsDeps(db.as(DatabaseRoles.ops));
const notificationService = getConsumer('notification-service');

/**
 * Yesterday's notification-service: it did not yet declare the aggregate type and producer
 * that the payments inbox design's envelopes lack, so every such record became ENVELOPE_INVALID poison.
 * Today's declaration supplies them; re-ingesting with today's schemas "fixes" the record.
 */
const yesterdays: ConsumerDeclaration = { ...notificationService, envelopeDefaults: {} };

let offset = 0;
function record(envelope: unknown): KafkaRecord {
  return {
    topic: PAYMENT_TOPIC,
    partition: 0,
    offset: offset++,
    timestamp: Date.parse('2026-07-03T09:15:31Z'),
    key: Buffer.from('payment-42').toString('base64'),
    value: Buffer.from(JSON.stringify(envelope)).toString('base64'),
    headers: [{ traceparent: [...Buffer.from('00-abc-def-01')] }, { bin: [0xff, 0x00] }],
  };
}

/** Ingest with yesterday's declaration; returns the poison row's id. */
async function poisonedYesterday(envelope: unknown): Promise<string> {
  const r = record(envelope);
  await ingestFor(db.sql, yesterdays)({ records: { [`${PAYMENT_TOPIC}-0`]: [r] } });
  const [row] = await db.sql<{ poison_id: string; error_code: string }[]>`
    select poison_id, error_code from integration.consumer_raw_poison where offset_no = ${r.offset}`;
  expect(row!.error_code).toBe('ENVELOPE_INVALID');
  return row!.poison_id;
}

const poisonRow = async (id: string) => (await db.sql`select * from integration.consumer_raw_poison where poison_id = ${id}`)[0]!;

beforeEach(async () => {
  await db.sql`truncate integration.consumer_inbox, integration.consumer_raw_poison, integration.operator_audit, public.notification_jobs`;
});

describe('poison reingest', () => {
  it("stores a record that today's schemas accept as an inbox row and resolves the poison row, in one go", async () => {
    const envelope = paymentCompleted(randomUUID());
    const poisonId = await poisonedYesterday(envelope);
    const poison = await poisonRow(poisonId);

    const result = await run(deps, { command: 'poison-reingest', id: poisonId });

    expect(result).toMatchObject({ dryRun: false, consumer: 'notification-service', eventId: envelope.event_id, alreadyInInbox: false });
    const [inbox] = await db.sql`select * from integration.consumer_inbox where inbox_id = ${result.inboxId}`;
    expect(inbox).toMatchObject({
      consumer_name: 'notification-service',
      event_id: envelope.event_id,
      event_type: 'payment.completed',
      status: 'RECEIVED',
      aggregate_type: 'payment',
      producer: 'payment-service',
      tenant_id: envelope.org_id,
      topic_name: PAYMENT_TOPIC,
      partition_no: 0,
      offset_no: poison.offset_no,
      record_key: 'payment-42',
      headers: poison.headers,
      payload: envelope.payload,
    });
    expect(await poisonRow(poisonId)).toMatchObject({ resolved_inbox_id: result.inboxId, resolved_by: 'alice' });
    expect((await poisonRow(poisonId)).resolved_at).toBeInstanceOf(Date);

    // And the consumer's worker takes it from there.
    const worked = await work(db.sql, notificationService);
    expect(worked).toMatchObject({ processed: 1 });
    const jobs = await db.sql`select organization_id, source_event_id from public.notification_jobs`;
    expect(jobs).toEqual([{ organization_id: envelope.org_id, source_event_id: envelope.event_id }]);
  });

  it('records the re-ingest in the operator audit: who, why, which poison row, which inbox row', async () => {
    const envelope = paymentCompleted(randomUUID());
    const poisonId = await poisonedYesterday(envelope);
    const poison = await poisonRow(poisonId);

    const result = await run(deps, { command: 'poison-reingest', id: poisonId, reason: 'producer default added in v43' });

    const audits = await db.sql`select * from integration.operator_audit`;
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({
      audit_id: result.auditId,
      action: 'reingest',
      actor: 'alice',
      reason: 'producer default added in v43',
      source: 'cli',
      dry_run: false,
      consumer_names: ['notification-service'],
      request: { poisonId },
      affected_count: 1,
      inbox_ids: [result.inboxId],
      outcome: {
        alreadyInInbox: false,
        topic: PAYMENT_TOPIC,
        partition: 0,
        offset: poison.offset_no,
        eventId: envelope.event_id,
        eventType: 'payment.completed',
        eventVersion: 1,
      },
    });
  });

  it('says why a record is still invalid and changes nothing', async () => {
    const poisonId = await poisonedYesterday(paymentCompleted('not-a-uuid'));
    const before = { poison: await poisonRow(poisonId), inbox: await allInboxRows(db.sql) };

    const error = await opsError(run(deps, { command: 'poison-reingest', id: poisonId }), 'STILL_INVALID');

    expect(error.message).toContain('ENVELOPE_INVALID');
    expect(error.message).toContain('event_id');
    expect(await poisonRow(poisonId)).toEqual(before.poison);
    expect(await allInboxRows(db.sql)).toEqual(before.inbox);
  });

  it('links the row already in the inbox when the event arrived again valid, without a duplicate', async () => {
    const envelope = paymentCompleted(randomUUID());
    const poisonId = await poisonedYesterday(envelope);
    await ingestFor(db.sql, 'notification-service')({ records: { [`${PAYMENT_TOPIC}-0`]: [record(envelope)] } });
    const [existing] = await db.sql`select inbox_id from integration.consumer_inbox`;

    const result = await run(deps, { command: 'poison-reingest', id: poisonId });

    expect(result).toMatchObject({ alreadyInInbox: true, inboxId: existing!.inbox_id });
    expect(await db.sql`select count(*)::int as n from integration.consumer_inbox`).toEqual([{ n: 1 }]);
    expect((await poisonRow(poisonId)).resolved_inbox_id).toBe(existing!.inbox_id);
  });

  it('checks without changing anything on a dry run', async () => {
    const poisonId = await poisonedYesterday(paymentCompleted(randomUUID()));
    const before = await poisonRow(poisonId);

    const result = await run(deps, { command: 'poison-reingest', id: poisonId, dryRun: true });

    expect(result).toMatchObject({ dryRun: true, valid: true, eventType: 'payment.completed' });
    expect(await poisonRow(poisonId)).toEqual(before);
    expect(await allInboxRows(db.sql)).toHaveLength(0);
    const audits = await db.sql`select action, dry_run, affected_count, inbox_ids, request from integration.operator_audit`;
    expect(audits).toEqual([{ action: 'reingest', dry_run: true, affected_count: 0, inbox_ids: [], request: { poisonId } }]);
  });

  it('refuses a resolved row, an unknown id and an anonymous Lambda caller', async () => {
    const poisonId = await poisonedYesterday(paymentCompleted(randomUUID()));
    await opsError(run(deps, { command: 'poison-reingest', id: poisonId }, { source: 'lambda' }), 'ACTOR_REQUIRED');
    await run(deps, { command: 'poison-reingest', id: poisonId });
    const again = await opsError(run(deps, { command: 'poison-reingest', id: poisonId }), 'ALREADY_RESOLVED');
    expect(again.details).toMatchObject({ resolvedBy: 'alice' });
    await opsError(run(deps, { command: 'poison-reingest', id: randomUUID() }), 'NOT_FOUND');
  });

  it('keeps a tombstone a tombstone', async () => {
    const { poison_id } = await insertPoisonRow(db.sql, { consumerName: 'case-projection', rawValue: null, errorCode: 'TOMBSTONE' });
    await db.sql`update integration.consumer_raw_poison set raw_encoding = 'none' where poison_id = ${poison_id}`;
    const error = await opsError(run(deps, { command: 'poison-reingest', id: poison_id }), 'STILL_INVALID');
    expect(error.details).toMatchObject({ errorCode: 'TOMBSTONE' });
  });
});
