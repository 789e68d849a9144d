/** Every outcome of processing, asserted on the inbox rows and the domain tables. */
import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { caseSla } from '../../../functions/consumers/case-sla';
import { defineHandler } from '../../../functions/framework';
import { ErrorCodes, NonRetryableError, RetryableError } from '../../../functions/lib/errors';
import { z } from 'zod';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow } from '../../helpers/factories';
import { inboxRow, one, variant, withTrigger, work } from './support';
import { workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const sql = db.sql;
/** The code under test connects as the worker function does. */
const asWorker = db.as(workerRoleOf(caseProjection));

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary, case_core.sla_obligation, public.notification_jobs`;
});

async function summary(caseId: string) {
  const [row] = await sql<{ case_status: string; last_aggregate_version: number; last_event_id: string }[]>`
    select case_status, last_aggregate_version, last_event_id from read_model.case_summary where case_id = ${caseId}`;
  return row;
}

/** A consumer whose `test.fail.v1` handler throws what the test hands it. */
function failingConsumer(error: () => unknown) {
  return variant(caseProjection, {
    handlers: {
      'test.fail.v1': {
        1: defineHandler({
          payload: z.object({}).passthrough(),
          async handle() {
            throw error();
          },
        }),
      },
    },
  });
}

describe('worker outcomes', () => {
  it('PROCESSED: applies the handler, sets processed_at and clears the previous error', async () => {
    const row = await insertInboxRow(sql, {
      payload: { caseId: 'case_ok', acceptedAt: '2026-07-03T09:15:30Z' },
      status: 'RETRY_PENDING',
      attemptCount: 2,
      nextAttemptInSeconds: -1,
      errorCode: 'DB_TRANSIENT',
    });

    const result = await work(asWorker, caseProjection);

    expect(result).toMatchObject({ claimed: 1, processed: 1, retried: 0, quarantined: 0, ignored: 0 });
    const state = await inboxRow(sql, row.inbox_id);
    expect(state).toMatchObject({ status: 'PROCESSED', attempt_count: 3, error_code: null, next_attempt_at: null, locked_by: null });
    expect(state.processed_at).toBeInstanceOf(Date);
    expect(await summary('case_ok')).toMatchObject({ case_status: 'ACCEPTED', last_event_id: row.event_id });
  });

  it('IGNORED: a case event that is not case-sla business changes nothing', async () => {
    const row = await insertInboxRow(sql, {
      consumerName: 'case-sla',
      eventType: 'regulatory.case.status-changed.v1',
      aggregateVersion: 2,
      payload: { caseId: 'case_ign', newStatus: 'IN_REVIEW' },
    });

    const result = await work(db.as(workerRoleOf(caseSla)), caseSla);

    expect(result).toMatchObject({ claimed: 1, ignored: 1 });
    expect(await inboxRow(sql, row.inbox_id)).toMatchObject({ status: 'IGNORED', attempt_count: 1, error_code: null });
    const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from case_core.sla_obligation`);
    expect(n).toBe(0);
  });

  it('case-sla opens one obligation due five days after acceptance', async () => {
    const row = await insertInboxRow(sql, {
      consumerName: 'case-sla',
      payload: { caseId: 'case_sla', acceptedAt: '2026-07-03T09:15:30Z' },
    });

    await work(db.as(workerRoleOf(caseSla)), caseSla);

    expect(await inboxRow(sql, row.inbox_id)).toMatchObject({ status: 'PROCESSED' });
    const obligations = await sql<{ obligation_type: string; due_at: Date; source_event_id: string }[]>`
      select obligation_type, due_at, source_event_id from case_core.sla_obligation where case_id = 'case_sla'`;
    expect(obligations).toEqual([
      { obligation_type: 'INITIAL_ASSESSMENT_DUE', due_at: new Date('2026-07-08T09:15:30Z'), source_event_id: row.event_id },
    ]);
  });

  it.each([
    ['an unknown type', { eventType: 'regulatory.case.closed.v1' }, ErrorCodes.UNSUPPORTED_EVENT_TYPE],
    ['a known type at an unknown version', { eventVersion: 2 }, ErrorCodes.UNSUPPORTED_EVENT_VERSION],
    ['a payload that fails its schema', { payload: { caseId: 42 } }, ErrorCodes.PAYLOAD_INVALID],
  ])('QUARANTINED: %s', async (_name, spec, code) => {
    const row = await insertInboxRow(sql, spec);

    const result = await work(asWorker, caseProjection);

    expect(result).toMatchObject({ claimed: 1, quarantined: 1 });
    const state = await inboxRow(sql, row.inbox_id);
    expect(state).toMatchObject({ status: 'QUARANTINED', error_code: code, attempt_count: 1, next_attempt_at: null, locked_by: null });
    expect(state.quarantined_at).toBeInstanceOf(Date);
    const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from read_model.case_summary`);
    expect(n).toBe(0);
  });

  it("RETRY_PENDING: a retryable error waits by the case inbox design's schedule for its attempt", async () => {
    const consumer = failingConsumer(() => new RetryableError('DOWNSTREAM_UNAVAILABLE', 'try later'));
    const first = await insertInboxRow(sql, { eventType: 'test.fail.v1' });
    const third = await insertInboxRow(sql, {
      eventType: 'test.fail.v1',
      status: 'RETRY_PENDING',
      attemptCount: 2,
      nextAttemptInSeconds: -1,
    });
    const fifth = await insertInboxRow(sql, {
      eventType: 'test.fail.v1',
      status: 'RETRY_PENDING',
      attemptCount: 4,
      nextAttemptInSeconds: -1,
    });

    const result = await work(asWorker, consumer);

    expect(result).toMatchObject({ claimed: 3, retried: 3 });
    expect(await inboxRow(sql, first.inbox_id)).toMatchObject({
      status: 'RETRY_PENDING',
      attempt_count: 1,
      error_code: 'DOWNSTREAM_UNAVAILABLE',
      delay_seconds: 5,
    });
    expect(await inboxRow(sql, third.inbox_id)).toMatchObject({ status: 'RETRY_PENDING', attempt_count: 3, delay_seconds: 30 });
    expect(await inboxRow(sql, fifth.inbox_id)).toMatchObject({ status: 'RETRY_PENDING', attempt_count: 5, delay_seconds: 600 });
  });

  it('RETRY_PENDING: jitter is added to the delay', async () => {
    const consumer = failingConsumer(() => new RetryableError('DOWNSTREAM_UNAVAILABLE', 'try later'));
    const row = await insertInboxRow(sql, {
      eventType: 'test.fail.v1',
      status: 'RETRY_PENDING',
      attemptCount: 3,
      nextAttemptInSeconds: -1,
    });

    await work(asWorker, consumer, { random: () => 0.5 });

    // attempt 4 → 120 s, plus floor(0.5 × min(60, 120)) = 30 s of jitter.
    expect(await inboxRow(sql, row.inbox_id)).toMatchObject({ attempt_count: 4, delay_seconds: 150 });
  });

  it('QUARANTINED: a non-retryable error keeps its code', async () => {
    const consumer = failingConsumer(() => new NonRetryableError('CASE_UNKNOWN', 'no such case'));
    const row = await insertInboxRow(sql, { eventType: 'test.fail.v1' });

    await work(asWorker, consumer);

    expect(await inboxRow(sql, row.inbox_id)).toMatchObject({ status: 'QUARANTINED', error_code: 'CASE_UNKNOWN', attempt_count: 1 });
  });

  it('QUARANTINED MAX_ATTEMPTS_EXCEEDED: a retryable failure at the last attempt', async () => {
    const consumer = failingConsumer(() => new RetryableError('DOWNSTREAM_UNAVAILABLE', 'try later'));
    const row = await insertInboxRow(sql, {
      eventType: 'test.fail.v1',
      status: 'RETRY_PENDING',
      attemptCount: 9,
      nextAttemptInSeconds: -1,
    });

    await work(asWorker, consumer);

    const state = await inboxRow(sql, row.inbox_id);
    expect(state).toMatchObject({
      status: 'QUARANTINED',
      error_code: ErrorCodes.MAX_ATTEMPTS_EXCEEDED,
      attempt_count: 10,
      next_attempt_at: null,
    });
    expect(state.error_detail).toMatchObject({ lastErrorCode: 'DOWNSTREAM_UNAVAILABLE' });
  });

  it('QUARANTINED MAX_ATTEMPTS_EXCEEDED: a row claimed beyond its budget is not run again', async () => {
    const row = await insertInboxRow(sql, {
      payload: { caseId: 'case_spent', acceptedAt: '2026-07-03T09:15:30Z' },
      status: 'RETRY_PENDING',
      attemptCount: 10,
      nextAttemptInSeconds: -1,
    });

    await work(asWorker, caseProjection);

    expect(await inboxRow(sql, row.inbox_id)).toMatchObject({
      status: 'QUARANTINED',
      error_code: ErrorCodes.MAX_ATTEMPTS_EXCEEDED,
      attempt_count: 11,
    });
    expect(await summary('case_spent')).toBeUndefined();
  });

  it('classifies a database error raised in a handler statement by SQLSTATE, rolling back only that row', async () => {
    const raiseBySqlState = {
      name: 'raise_by_case',
      on: 'read_model.case_summary',
      when: 'after insert',
      body: `if new.case_id like 'case_raise_%' then
               raise exception 'raised for the test' using errcode = substr(new.case_id, 12);
             end if;
             return new;`,
    };
    await withTrigger(sql, raiseBySqlState, async () => {
      const transient = await insertInboxRow(sql, { payload: { caseId: 'case_raise_40001', acceptedAt: '2026-07-03T09:15:30Z' } });
      const data = await insertInboxRow(sql, { payload: { caseId: 'case_raise_22023', acceptedAt: '2026-07-03T09:15:30Z' } });
      const integrity = await insertInboxRow(sql, { payload: { caseId: 'case_raise_23514', acceptedAt: '2026-07-03T09:15:30Z' } });
      const fine = await insertInboxRow(sql, { payload: { caseId: 'case_fine', acceptedAt: '2026-07-03T09:15:30Z' } });

      const result = await work(asWorker, caseProjection);

      expect(result).toMatchObject({ claimed: 4, processed: 1, retried: 1, quarantined: 2 });
      const t = await inboxRow(sql, transient.inbox_id);
      expect(t).toMatchObject({ status: 'RETRY_PENDING', error_code: ErrorCodes.DB_TRANSIENT, attempt_count: 1, delay_seconds: 5 });
      expect(t.error_detail).toMatchObject({ sqlState: '40001' });
      const d = await inboxRow(sql, data.inbox_id);
      expect(d).toMatchObject({ status: 'QUARANTINED', error_code: ErrorCodes.DB_DATA_EXCEPTION });
      expect(d.error_detail).toMatchObject({ sqlState: '22023' });
      expect(await inboxRow(sql, integrity.inbox_id)).toMatchObject({
        status: 'QUARANTINED',
        error_code: ErrorCodes.DB_INTEGRITY_VIOLATION,
      });
      expect(await inboxRow(sql, fine.inbox_id)).toMatchObject({ status: 'PROCESSED' });
      const cases = await sql<{ case_id: string }[]>`select case_id from read_model.case_summary order by case_id`;
      expect(cases.map((c) => c.case_id)).toEqual(['case_fine']);
    });
  });

  it('a batch transaction that fails as a whole commits nothing and leaves its rows for retry', async () => {
    // The commit itself is refused (a deferred check raising a serialization failure, as a
    // SERIALIZABLE commit can): nothing of the batch may apply, and every row is retried.
    const refuseCommit = {
      name: 'refuse_commit',
      on: 'read_model.case_summary',
      when: 'after insert',
      deferred: true,
      body: `raise exception 'refused at commit for the test' using errcode = '40001';`,
    };
    await withTrigger(sql, refuseCommit, async () => {
      const rows = [
        await insertInboxRow(sql, { payload: { caseId: 'case_lost_1', acceptedAt: '2026-07-03T09:15:30Z' } }),
        await insertInboxRow(sql, { payload: { caseId: 'case_lost_2', acceptedAt: '2026-07-03T09:15:30Z' } }),
      ];

      const result = await work(asWorker, caseProjection);

      expect(result).toMatchObject({ claimed: 2, processed: 0, retried: 2 });
      for (const row of rows) {
        const state = await inboxRow(sql, row.inbox_id);
        expect(state).toMatchObject({
          status: 'RETRY_PENDING',
          error_code: ErrorCodes.DB_TRANSIENT,
          attempt_count: 1,
          locked_by: null,
          delay_seconds: 5,
        });
        expect(state.error_detail).toMatchObject({ sqlState: '40001' });
      }
      const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from read_model.case_summary`);
      expect(n).toBe(0);
    });
  });

  it('a set-based batch that cannot apply as one statement falls back to applying its events apart', async () => {
    // Two aggregates whose events name the same case: one upsert cannot touch a row twice
    // (SQLSTATE 21000), so the fast path fails and each event applies on its own.
    const first = await insertInboxRow(sql, {
      aggregateId: 'agg_a',
      payload: { caseId: 'case_shared', acceptedAt: '2026-07-03T09:15:30Z' },
      receivedSecondsAgo: 2,
    });
    const second = await insertInboxRow(sql, {
      aggregateId: 'agg_b',
      payload: { caseId: 'case_shared', acceptedAt: '2026-07-04T09:15:30Z' },
      receivedSecondsAgo: 1,
    });

    const result = await work(asWorker, caseProjection);

    expect(result).toMatchObject({ claimed: 2, processed: 2 });
    expect(await inboxRow(sql, first.inbox_id)).toMatchObject({ status: 'PROCESSED' });
    expect(await inboxRow(sql, second.inbox_id)).toMatchObject({ status: 'PROCESSED' });
    expect(await summary('case_shared')).toMatchObject({ case_status: 'ACCEPTED', last_event_id: second.event_id });
  });
});
