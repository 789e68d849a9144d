/**
 * The processing transaction in full (the case inbox design): side effect, domain audit, outbox events
 * and the row's status commit together. Audit and outbox rows appear once per applied
 * effect, none for a stale duplicate, an existing obligation or an ignored event, and they
 * vanish with an attempt that rolls back — the fast path's savepoint and the slow path's
 * (by halves, then row by row) alike. A replayed quarantined row emits the same event id.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CASE_ACCEPTED, CASE_STATUS_CHANGED, caseProjection } from '../../../functions/consumers/case-projection';
import { caseSla, SLA_OBLIGATION_OPENED, SLA_OBLIGATIONS_TOPIC } from '../../../functions/consumers/case-sla';
import { caseAudit } from '../../../functions/consumers/case-audit';
import { defineBatchHandler } from '../../../functions/framework';
import type { ConsumerDeclaration } from '../../../functions/framework';
import { DEFAULT_RETENTION, DEFAULT_RETRY } from '../../../functions/framework';
import { claimDue } from '../../../functions/inbox/claim-due';
import { replayQuarantined } from '../../../functions/ops/queries/replay';
import { ErrorCodes, NonRetryableError } from '../../../functions/lib/errors';
import { outboxEventId } from '../../../functions/outbox/event-id';
import type { OutboxRow as OutboxTableRow } from '../../../functions/outbox/types';
import { lanesOf, processBatch } from '../../../functions/worker/process-batch';
import { newOwnerId } from '../../../functions/worker/run-worker';
import { useTestDatabase } from '../../helpers/db';
import { caseAcceptedPayload, insertInboxRow, insertInboxRows } from '../../helpers/factories';
import { variant, work } from '../worker/support';

const db = await useTestDatabase();
const sql = db.sql;

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, integration.outbox, integration.outbox_lane,
            case_core.case_audit, case_core.sla_obligation, read_model.case_summary restart identity`;
});

interface AuditRow {
  case_id: string;
  consumer_name: string;
  source_event_id: string;
  change: string;
  before_value: Record<string, unknown> | null;
  after_value: Record<string, unknown> | null;
}

async function auditRows(): Promise<AuditRow[]> {
  return sql<AuditRow[]>`
    select case_id, consumer_name, source_event_id, change, before_value, after_value
    from case_core.case_audit order by audit_id`;
}

/** What a test reads of an outbox row: the emitted event, and whether it was published. */
type OutboxRow = Omit<OutboxTableRow, 'outbox_seq' | 'occurred_at' | 'attempt_count'> & { published_at: Date | null };

async function outboxRows(): Promise<OutboxRow[]> {
  return sql<OutboxRow[]>`
    select event_id::text, consumer_name, source_event_id, ordinal, topic_name, event_type, event_version,
           aggregate_type, aggregate_id, producer, correlation_id, payload, published_at
    from integration.outbox order by outbox_seq`;
}

const slaRow = (caseId: string, extra: Parameters<typeof insertInboxRow>[1] = {}) => ({
  consumerName: 'case-sla',
  aggregateId: caseId,
  payload: caseAcceptedPayload(caseId),
  ...extra,
});

describe('case-sla: the obligation, its audit and its event, once', () => {
  it('an accepted case opens one obligation, one audit row and one outbox event with the canonical fields', async () => {
    const row = await insertInboxRow(sql, slaRow('case_a', { eventId: 'evt_a', correlationId: 'corr_a' }));

    const result = await work(sql, caseSla);

    expect(result).toMatchObject({ processed: 1 });
    expect(await auditRows()).toEqual([
      {
        case_id: 'case_a',
        consumer_name: 'case-sla',
        source_event_id: 'evt_a',
        change: 'SLA_OBLIGATION_OPENED',
        before_value: null,
        after_value: { obligationType: 'INITIAL_ASSESSMENT_DUE', dueAt: '2026-07-08T09:15:30.000Z', status: 'OPEN' },
      },
    ]);
    expect(await outboxRows()).toEqual([
      {
        event_id: outboxEventId('case-sla', row.event_id, SLA_OBLIGATION_OPENED, 0),
        consumer_name: 'case-sla',
        source_event_id: 'evt_a',
        ordinal: 0,
        topic_name: SLA_OBLIGATIONS_TOPIC,
        event_type: SLA_OBLIGATION_OPENED,
        event_version: 1,
        aggregate_type: 'case',
        aggregate_id: 'case_a',
        producer: 'case-sla',
        correlation_id: 'corr_a',
        payload: { caseId: 'case_a', obligationType: 'INITIAL_ASSESSMENT_DUE', dueAt: '2026-07-08T09:15:30.000Z' },
        published_at: null,
      },
    ]);
    // The relay's lane for the case is marked due.
    expect(await sql`select aggregate_type, aggregate_id, locked_by from integration.outbox_lane`).toEqual([
      { aggregate_type: 'case', aggregate_id: 'case_a', locked_by: null },
    ]);
  });

  it('a second accepted event for a case whose obligation exists: processed, no audit, no event', async () => {
    await insertInboxRow(sql, slaRow('case_b', { eventId: 'evt_b1', receivedSecondsAgo: 10 }));
    await work(sql, caseSla);
    await insertInboxRow(sql, slaRow('case_b', { eventId: 'evt_b2' }));

    const result = await work(sql, caseSla);

    expect(result).toMatchObject({ processed: 1 });
    expect((await auditRows()).map((a) => a.source_event_id)).toEqual(['evt_b1']);
    expect((await outboxRows()).map((o) => o.source_event_id)).toEqual(['evt_b1']);
  });

  it('an ignored event (another case event type) writes neither audit nor outbox', async () => {
    await insertInboxRow(sql, {
      consumerName: 'case-sla',
      eventType: CASE_STATUS_CHANGED,
      aggregateVersion: 2,
      payload: { caseId: 'case_i', newStatus: 'X' },
    });

    const result = await work(sql, caseSla);

    expect(result).toMatchObject({ ignored: 1, processed: 0 });
    expect(await auditRows()).toEqual([]);
    expect(await outboxRows()).toEqual([]);
  });

  it('a batch of many cases: one statement each for obligations, audit and outbox; one of each per case', async () => {
    await insertInboxRows(
      sql,
      Array.from({ length: 30 }, (_, i) => slaRow(`case_m${i}`)),
    );

    const result = await work(sql, caseSla);

    expect(result).toMatchObject({ processed: 30 });
    const outbox = await outboxRows();
    expect(outbox).toHaveLength(30);
    expect(new Set(outbox.map((o) => o.aggregate_id)).size).toBe(30);
    expect(await auditRows()).toHaveLength(30);
  });
});

describe('case-projection: one audit row per applied change, none for a stale duplicate', () => {
  it('accepted, then status changes in order: each applied effect audited with before → after', async () => {
    await insertInboxRows(sql, [
      { eventId: 'evt_p0', aggregateId: 'case_p', payload: caseAcceptedPayload('case_p'), receivedSecondsAgo: 30 },
      {
        eventId: 'evt_p1',
        aggregateId: 'case_p',
        eventType: CASE_STATUS_CHANGED,
        aggregateVersion: 1,
        payload: { caseId: 'case_p', newStatus: 'IN_REVIEW' },
        receivedSecondsAgo: 20,
      },
      {
        eventId: 'evt_p2',
        aggregateId: 'case_p',
        eventType: CASE_STATUS_CHANGED,
        aggregateVersion: 2,
        payload: { caseId: 'case_p', newStatus: 'DECIDED' },
        receivedSecondsAgo: 10,
      },
    ]);

    await work(sql, caseProjection);

    expect(
      (await auditRows()).map(({ source_event_id, change, before_value, after_value }) => ({
        source_event_id,
        change,
        before_value,
        after_value,
      })),
    ).toEqual([
      {
        source_event_id: 'evt_p1',
        change: 'CASE_STATUS_CHANGED',
        before_value: null,
        after_value: { status: 'IN_REVIEW', aggregateVersion: 1 },
      },
      {
        source_event_id: 'evt_p2',
        change: 'CASE_STATUS_CHANGED',
        before_value: { status: 'IN_REVIEW' },
        after_value: { status: 'DECIDED', aggregateVersion: 2 },
      },
      {
        source_event_id: 'evt_p0',
        change: 'CASE_ACCEPTED',
        before_value: { status: 'DECIDED' },
        after_value: { status: 'ACCEPTED', acceptedAt: '2026-07-03T09:15:30.000Z' },
      },
    ]);
  });

  it('a stale duplicate version is processed without an audit row', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_s', 'DECIDED', 3)`;
    await insertInboxRow(sql, {
      eventId: 'evt_s2',
      aggregateId: 'case_s',
      eventType: CASE_STATUS_CHANGED,
      aggregateVersion: 2,
      payload: { caseId: 'case_s', newStatus: 'OLD' },
    });

    const result = await work(sql, caseProjection);

    expect(result).toMatchObject({ processed: 1 });
    expect(await auditRows()).toEqual([]);
    expect(await sql`select case_status from read_model.case_summary where case_id = 'case_s'`).toEqual([{ case_status: 'DECIDED' }]);
  });

  it('an accepted event repeated (same last_event_id) changes nothing and audits nothing', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, accepted_at, last_event_id) values ('case_r', 'ACCEPTED', now(), 'evt_r')`;
    await insertInboxRow(sql, { eventId: 'evt_r', aggregateId: 'case_r', payload: caseAcceptedPayload('case_r') });

    await work(sql, caseProjection);

    expect(await auditRows()).toEqual([]);
  });
});

/**
 * A test consumer whose set-based handler audits and emits for every event, recording in
 * both which call of the handler for that event wrote them, and then fails the whole call
 * if any event asks to. On the fast path the events of a stage share one call; on the
 * slow path each half of the lanes shares one, and a failing lane's rows get one each.
 */
function emitter(calls: Map<string, number>): ConsumerDeclaration {
  return {
    name: 'test-emitter',
    topics: ['test.in'],
    dialect: 'canonical',
    mode: 'deferred',
    handlers: {
      'test.emit.v1': {
        1: defineBatchHandler({
          payload: z.object({ subject: z.string(), fail: z.boolean().optional(), twice: z.boolean().optional() }),
          async handleBatch(_tx, events, context) {
            const call = (e: (typeof events)[number]) => {
              const n = (calls.get(e.eventId) ?? 0) + 1;
              calls.set(e.eventId, n);
              return n;
            };
            const stamped = events.map((e) => ({ e, call: call(e) }));
            await context.audit(
              stamped.map(({ e, call }) => ({ source: e, subjectId: e.payload.subject, change: 'TOUCHED', after: { call } })),
            );
            await context.emit(
              stamped.flatMap(({ e, call }) =>
                Array.from({ length: e.payload.twice ? 2 : 1 }, () => ({
                  source: e,
                  eventType: 'test.touched.v1',
                  aggregateId: e.payload.subject,
                  payload: { call },
                })),
              ),
            );
            if (events.some((e) => e.payload.fail)) throw new NonRetryableError('TEST_FAILED', 'asked to fail');
          },
        }),
      },
    },
    retry: DEFAULT_RETRY,
    retention: DEFAULT_RETENTION,
    audit: caseAudit,
    emits: { 'test.touched.v1': { topic: 'test.out', eventVersion: 1, aggregateType: 'subject' } },
  };
}

const emitterRow = (subject: string, payload: Record<string, unknown> = {}) => ({
  consumerName: 'test-emitter',
  eventType: 'test.emit.v1',
  aggregateId: subject,
  payload: { subject, ...payload },
});

describe('rolled-back attempts take their audit and outbox rows with them', () => {
  it('fast path fails, slow path reruns: the failed row leaves nothing, the others keep only the slow path’s rows', async () => {
    const calls = new Map<string, number>();
    const consumer = emitter(calls);
    const [ok1, bad, ok2] = await insertInboxRows(sql, [emitterRow('s1'), emitterRow('s2', { fail: true }), emitterRow('s3')]);
    const owner = newOwnerId('rollback');
    const claim = await claimDue(sql, { consumerName: consumer.name, owner, limit: 10, leaseSeconds: 60 });

    const report = await processBatch({ sql, consumer, owner, remainingMs: () => 60_000, safetyMarginMs: 1_000 }, lanesOf(claim));

    // Call 1 was the fast path (all three in one call, rolled back); then the slow path's
    // halves: s1–s2 (rolled back), s1 alone (applied: its call 3), s2 alone (rolled back)
    // and s2 row by row (quarantined: its call 4), s3 alone (applied: its call 2).
    expect(report.slowPath).toBe(true);
    expect(Object.fromEntries(calls)).toEqual({ [ok1!.event_id]: 3, [bad!.event_id]: 4, [ok2!.event_id]: 2 });
    expect((await outboxRows()).map((o) => ({ source: o.source_event_id, payload: o.payload }))).toEqual([
      { source: ok1!.event_id, payload: { call: 3 } },
      { source: ok2!.event_id, payload: { call: 2 } },
    ]);
    expect((await auditRows()).map((a) => ({ source: a.source_event_id, after: a.after_value }))).toEqual([
      { source: ok1!.event_id, after: { call: 3 } },
      { source: ok2!.event_id, after: { call: 2 } },
    ]);
    expect(await sql`select event_id, status, error_code from integration.consumer_inbox order by event_id`).toEqual(
      [
        { event_id: ok1!.event_id, status: 'PROCESSED', error_code: null },
        { event_id: bad!.event_id, status: 'QUARANTINED', error_code: 'TEST_FAILED' },
        { event_id: ok2!.event_id, status: 'PROCESSED', error_code: null },
      ].sort((a, b) => a.event_id.localeCompare(b.event_id)),
    );
    // A lane only for aggregates with something to publish.
    expect(
      (await sql<{ aggregate_id: string }[]>`select aggregate_id from integration.outbox_lane order by aggregate_id`).map(
        (l) => l.aggregate_id,
      ),
    ).toEqual(['s1', 's3']);
  });

  it('two events of one type for one source: ordinals 0 and 1, two distinct derived ids', async () => {
    const consumer = emitter(new Map());
    const row = await insertInboxRow(sql, emitterRow('s4', { twice: true }));

    await work(sql, consumer);

    expect((await outboxRows()).map((o) => ({ ordinal: o.ordinal, event_id: o.event_id }))).toEqual([
      { ordinal: 0, event_id: outboxEventId('test-emitter', row.event_id, 'test.touched.v1', 0) },
      { ordinal: 1, event_id: outboxEventId('test-emitter', row.event_id, 'test.touched.v1', 1) },
    ]);
  });

  it('emitting an undeclared event type quarantines the row OUTBOX_EVENT_UNDECLARED and writes nothing', async () => {
    const base = emitter(new Map());
    const consumer = { ...base, emits: {} };
    await insertInboxRow(sql, emitterRow('s5'));

    const result = await work(sql, consumer);

    expect(result).toMatchObject({ quarantined: 1 });
    expect(await sql`select status, error_code from integration.consumer_inbox`).toEqual([
      { status: 'QUARANTINED', error_code: ErrorCodes.OUTBOX_EVENT_UNDECLARED },
    ]);
    expect(await outboxRows()).toEqual([]);
    expect(await auditRows()).toEqual([]);
  });
});

describe('a replayed quarantined row emits the same event id', () => {
  it('the attempt that failed after emitting left nothing; the replay emits the id that attempt had derived', async () => {
    // case-sla whose accepted handler runs the real one, reads back the event id it emitted
    // (inside the attempt's savepoint), then fails permanently.
    const seen: string[] = [];
    const real = caseSla.handlers[CASE_ACCEPTED]![1]!;
    const failing = variant(caseSla, {
      handlers: {
        [CASE_ACCEPTED]: {
          1: {
            payload: real.payload,
            async handle(tx, event, context) {
              await real.handle(tx, event, context);
              const rows = await tx<
                { event_id: string }[]
              >`select event_id::text from integration.outbox where source_event_id = ${event.eventId}`;
              seen.push(...rows.map((r) => r.event_id));
              throw new NonRetryableError('DOWNSTREAM_CONTRACT', 'refused after emitting');
            },
          },
        },
      },
    });
    const row = await insertInboxRow(sql, slaRow('case_q', { eventId: 'evt_q' }));
    await work(sql, failing);
    expect(await sql`select status, error_code from integration.consumer_inbox`).toEqual([
      { status: 'QUARANTINED', error_code: 'DOWNSTREAM_CONTRACT' },
    ]);
    expect(await outboxRows()).toEqual([]);
    expect(await sql`select count(*)::int as n from case_core.sla_obligation`).toEqual([{ n: 0 }]);

    await replayQuarantined(sql, {
      selection: { inboxIds: [row.inbox_id] },
      limit: 10,
      actor: 'test',
      reason: 'fixed downstream',
      source: 'cli',
    });
    const result = await work(sql, caseSla);

    expect(result).toMatchObject({ processed: 1 });
    // The failed attempt ran twice (fast path, then its own savepoint): both derived one id.
    const derived = outboxEventId('case-sla', 'evt_q', SLA_OBLIGATION_OPENED, 0);
    expect(seen).toEqual([derived, derived]);
    expect((await outboxRows()).map((o) => o.event_id)).toEqual([derived]);
    expect((await auditRows()).map((a) => a.source_event_id)).toEqual(['evt_q']);
  });
});
