/**
 * Each function's database role, used by that function's own code: what the function does
 * succeeds as its role, and what it has no business doing is refused by PostgreSQL with
 * SQLSTATE 42501 (insufficient_privilege), changing nothing.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { notificationService } from '../../../functions/consumers/notification-service';
import { caseSla } from '../../../functions/consumers/case-sla';
import { DatabaseRoles, ingestRoleOf, relayRoleOf, workerRoleOf, type DatabaseRole } from '../../../functions/lib/database-roles';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { caseAcceptedPayload, insertInboxRows, insertPoisonRow } from '../../helpers/factories';
import { CASE_TOPIC, caseAccepted, ingestFor, PAYMENT_TOPIC, paymentCompleted } from '../ingest/support';
import { opsDeps, run } from '../ops/support';
import { CountingProducer, insertOutboxRows, relay as relayAs } from '../outbox/support';
import { reap } from '../reaper/support';
import { work } from '../worker/support';

const db = await useTestDatabase();
const { reaper, ops } = DatabaseRoles;
// The ingest, worker and relay functions log in as their consumer's own role.
const ingest = ingestRoleOf(caseProjection);
const ingestInline = ingestRoleOf(notificationService);
const worker = workerRoleOf(caseProjection);
const relay = relayRoleOf(caseSla);

beforeEach(async () => {
  await db.sql`
    truncate integration.consumer_inbox, integration.consumer_raw_poison, integration.operator_audit,
             read_model.case_summary, case_core.sla_obligation, public.notification_jobs`;
});

/** The PostgreSQL error `statement` fails with as `role`, or undefined when it succeeds. */
async function refusal(role: DatabaseRole, statement: string): Promise<string | undefined> {
  try {
    // Inside a transaction that is always rolled back: a statement that is (wrongly) allowed changes nothing.
    await db.as(role).begin(async (tx) => {
      await tx.unsafe(statement);
      throw new Error('allowed');
    });
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code ?? (error as Error).message;
  }
}

describe("inbox_ingest_case_projection (a deferred consumer's ingest)", () => {
  it("stores a deferred consumer's batch, poison included, as its role", async () => {
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: caseAccepted('evt_role_i1') }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 2, rawValue: Buffer.from('not json').toString('base64') }),
    ]);

    const report = await ingestFor(db.as(ingest), 'case-projection')(event);

    expect(report.response).toEqual({ batchItemFailures: [] });
    expect(await db.sql`select event_id, status from integration.consumer_inbox where consumer_name = 'case-projection'`).toEqual([
      { event_id: 'evt_role_i1', status: 'RECEIVED' },
    ]);
    expect(await db.sql`select offset_no, error_code from integration.consumer_raw_poison`).toEqual([
      { offset_no: 2, error_code: 'INVALID_JSON' },
    ]);
  });
});

describe("inbox_ingest_notification_service (an inline consumer's ingest)", () => {
  it('stores and processes an inline batch in the ingest transaction, as its role', async () => {
    const event = mskEvent([
      mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 1, value: paymentCompleted('6f1c1a7e-0000-4000-8000-000000000001') }),
    ]);

    const report = await ingestFor(db.as(ingestInline), 'notification-service')(event);

    expect(report).toMatchObject({ inserted: 1, processed: 1, strategy: 'direct' });
    expect(await db.sql`select status from integration.consumer_inbox where consumer_name = 'notification-service'`).toEqual([
      { status: 'PROCESSED' },
    ]);
    expect(await db.sql`select source_event_id from public.notification_jobs`).toEqual([
      { source_event_id: '6f1c1a7e-0000-4000-8000-000000000001' },
    ]);
  });
});

describe('inbox_worker_case_projection', () => {
  it('claims, processes and completes rows, writing the projection, as its role', async () => {
    await insertInboxRows(db.sql, [{ eventId: 'evt_role_w1', payload: caseAcceptedPayload('case_role_w1') }]);

    const result = await work(db.as(worker), caseProjection);

    expect(result).toMatchObject({ claimed: 1, processed: 1 });
    expect(await db.sql`select status from integration.consumer_inbox where event_id = 'evt_role_w1'`).toEqual([{ status: 'PROCESSED' }]);
    expect(await db.sql`select case_status from read_model.case_summary where case_id = 'case_role_w1'`).toEqual([
      { case_status: 'ACCEPTED' },
    ]);
  });
});

describe('inbox_relay_case_sla', () => {
  it("claims, publishes and records its consumer's outbox rows, and applies their retention, as its role", async () => {
    await db.sql`truncate integration.outbox, integration.outbox_lane`;
    await insertOutboxRows(db.sql, [{ aggregateId: 'r1' }, { aggregateId: 'r1' }, { aggregateId: 'r2' }]);
    const producer = new CountingProducer();

    const result = await relayAs(db.as(relay), producer);

    expect(result).toMatchObject({ claimed: 3, published: 3, lost: 0 });
    expect(await db.sql`select * from integration.outbox where published_at is null`).toEqual([]);
    expect(await db.sql`select * from integration.outbox_lane`).toEqual([]);
  });
});

describe('inbox_reaper', () => {
  it('releases an expired lease and applies retention, as its role', async () => {
    const [stale] = await insertInboxRows(db.sql, [{ status: 'PROCESSING', lockedBy: 'gone', leaseExpiresInSeconds: -5, attemptCount: 1 }]);
    const { poison_id } = await insertPoisonRow(db.sql, { createdSecondsAgo: 400 * 86_400 });

    const result = await reap(db.as(reaper));

    expect(result.released).toBe(1);
    expect(await db.sql`select status, error_code from integration.consumer_inbox where inbox_id = ${stale!.inbox_id}`).toEqual([
      { status: 'RETRY_PENDING', error_code: 'STALE_PROCESSING_LOCK' },
    ]);
    expect(await db.sql`select poison_id from integration.consumer_raw_poison where poison_id = ${poison_id}`).toEqual([]);
  });
});

describe('inbox_ops', () => {
  it('replays a quarantined row with its audit row and re-ingests a poison record, as its role', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' }]);
    const { poison_id } = await insertPoisonRow(db.sql, {
      consumerName: 'case-projection',
      rawValue: JSON.stringify(caseAccepted('evt_role_o1')),
    });
    const deps = opsDeps(db.as(ops));

    const replayed = await run(deps, { command: 'replay', ids: [row!.inbox_id], reason: 'role test' });
    const reingested = await run(deps, { command: 'poison-reingest', id: poison_id });

    expect(replayed).toMatchObject({ dryRun: false, replayed: 1 });
    expect(reingested).toMatchObject({ dryRun: false, eventId: 'evt_role_o1' });
    expect(await db.sql`select status from integration.consumer_inbox where inbox_id = ${row!.inbox_id}`).toEqual([
      { status: 'RETRY_PENDING' },
    ]);
    expect(await db.sql`select actor, reason from integration.operator_audit where action = 'replay'`).toEqual([
      { actor: 'alice', reason: 'role test' },
    ]);
    expect(await db.sql`select resolved_by from integration.consumer_raw_poison where poison_id = ${poison_id}`).toEqual([
      { resolved_by: 'alice' },
    ]);
  });
});

// Statements several roles must be refused.
const INSERT_INBOX_ROW =
  "insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, topic_name, partition_no, offset_no, producer, occurred_at, status, payload) values ('c', 'e', 't', 1, 'a', 'a', 't', 0, 0, 'p', now(), 'RECEIVED', '{}')";
const INSERT_AUDIT_ROW =
  "insert into integration.operator_audit (action, actor, reason, source, affected_count) values ('pause', 'a', 'r', 'cli', 0)";
const INSERT_SLA_OBLIGATION =
  "insert into case_core.sla_obligation (case_id, obligation_type, due_at, source_event_id, status) values ('c', 't', now(), 'e', 'OPEN')";
const INSERT_NOTIFICATION_JOB =
  "insert into public.notification_jobs (organization_id, channel, payload) values (gen_random_uuid(), 'email', '{}')";
const INSERT_CASE_SUMMARY = "insert into read_model.case_summary (case_id, case_status) values ('c', 'X')";

/** What each role's function never does: PostgreSQL refuses it (42501). */
const REFUSED: Record<string, [what: string, statement: string][]> = {
  [ingest]: [
    ['read stored events (payloads)', 'select payload from integration.consumer_inbox'],
    ['change an inbox row', "update integration.consumer_inbox set status = 'PROCESSED'"],
    ['delete inbox rows', 'delete from integration.consumer_inbox'],
    ['read poison rows', 'select raw_value from integration.consumer_raw_poison'],
    ['delete poison rows', 'delete from integration.consumer_raw_poison'],
    ['write the case projection', INSERT_CASE_SUMMARY],
    ['write SLA obligations', INSERT_SLA_OBLIGATION],
    ["write an inline consumer's jobs", INSERT_NOTIFICATION_JOB],
    ['write the operator audit', INSERT_AUDIT_ROW],
    ['create a table in its schema', 'create table integration.sneaky (id int)'],
    ['create a table in public', 'create table public.sneaky (id int)'],
    ['empty the inbox', 'truncate integration.consumer_inbox'],
    ['drop the inbox', 'drop table integration.consumer_inbox'],
  ],
  [ingestInline]: [
    ['rewrite a stored payload', "update integration.consumer_inbox set payload = '{}'"],
    ['rewrite an event id', "update integration.consumer_inbox set event_id = 'other'"],
    ['move a row to another consumer', "update integration.consumer_inbox set consumer_name = 'other'"],
    ['delete inbox rows', 'delete from integration.consumer_inbox'],
    ['write the case projection (a deferred consumer)', INSERT_CASE_SUMMARY],
    ['read the SLA obligations (a deferred consumer)', 'select * from case_core.sla_obligation'],
    ['read the jobs it wrote', 'select payload from public.notification_jobs'],
    ['create a table', 'create table public.sneaky (id int)'],
  ],
  [worker]: [
    ['delete inbox rows', 'delete from integration.consumer_inbox'],
    ['insert inbox rows', INSERT_INBOX_ROW],
    ['rewrite a stored payload', "update integration.consumer_inbox set payload = '{}'"],
    ['read poison rows', 'select raw_value from integration.consumer_raw_poison'],
    ['write the operator audit', INSERT_AUDIT_ROW],
    ['delete from the projection', 'delete from read_model.case_summary'],
    ['delete SLA obligations', 'delete from case_core.sla_obligation'],
    ['create a table', 'create table read_model.sneaky (id int)'],
  ],
  [reaper]: [
    ['write the projection', "update read_model.case_summary set case_status = 'X'"],
    ['write SLA obligations', INSERT_SLA_OBLIGATION],
    ['write notification jobs', INSERT_NOTIFICATION_JOB],
    ['insert inbox rows', INSERT_INBOX_ROW],
    ['rewrite an event id', "update integration.consumer_inbox set event_id = 'other'"],
    ['mark a row processed', 'update integration.consumer_inbox set processed_at = now()'],
    ['rewrite a stored payload', `update integration.consumer_inbox set payload = '{"forged": true}'`],
    ['rewrite stored headers', `update integration.consumer_inbox set headers = '{"forged": true}'`],
    ['touch the operator audit', 'delete from integration.operator_audit'],
    ['create a table', 'create table integration.sneaky (id int)'],
  ],
  [ops]: [
    ['delete inbox rows', 'delete from integration.consumer_inbox'],
    ['rewrite a stored payload', "update integration.consumer_inbox set payload = '{}'"],
    ['delete poison rows', 'delete from integration.consumer_raw_poison'],
    ['rewrite a poison record', "update integration.consumer_raw_poison set raw_value = 'x'"],
    ['rewrite the operator audit', "update integration.operator_audit set reason = 'x'"],
    ['delete the operator audit', 'delete from integration.operator_audit'],
    ['write the projection', "update read_model.case_summary set case_status = 'X'"],
    ['read notification jobs', 'select payload from public.notification_jobs'],
    ['read the migration history', 'select * from public.inbox_schema_history'],
    ['create a table', 'create table integration.sneaky (id int)'],
  ],
  [relay]: [
    ['read stored events (payloads)', 'select payload from integration.consumer_inbox'],
    ['change an inbox row', "update integration.consumer_inbox set status = 'PROCESSED'"],
    [
      'emit an event',
      "insert into integration.outbox (event_id, consumer_name, source_event_id, ordinal, topic_name, event_type, event_version, aggregate_type, aggregate_id, producer, payload) values (gen_random_uuid(), 'c', 'e', 0, 't', 'x', 1, 'a', 'a', 'p', '{}')",
    ],
    ['rewrite an emitted payload', "update integration.outbox set payload = '{}'"],
    [
      'write the case audit',
      "insert into case_core.case_audit (case_id, consumer_name, source_event_id, change) values ('c', 'c', 'e', 'X')",
    ],
    ['write the projection', INSERT_CASE_SUMMARY],
    ['create a table', 'create table integration.sneaky (id int)'],
  ],
};

describe.each(Object.entries(REFUSED))('%s', (role, refused) => {
  it.each(refused)('cannot %s', async (_, statement) => {
    expect(await refusal(role as DatabaseRole, statement)).toBe('42501');
  });
});
