/**
 * case-projection's status changes, set-based: one statement for a claimed batch, with
 * exactly the effect of one event at a time (the statements the worker's fallback runs) —
 * applied, stale duplicate, first version, gap — and that fallback whenever the batch's
 * snapshot cannot tell.
 */
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { CASE_ACCEPTED, CASE_STATUS_CHANGED, caseProjection } from '../../../functions/consumers/case-projection';
import { ErrorCodes } from '../../../functions/lib/errors';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { countingStatements, quietObservability, work } from './support';

const db = await useTestDatabase();
const sql = db.sql;
const asWorker = db.as(workerRoleOf(caseProjection));

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary, case_core.case_audit`;
});

function statusChanged(aggregateId: string, version: number, caseId = aggregateId): InboxRowSpec {
  return {
    aggregateId,
    aggregateVersion: version,
    eventType: CASE_STATUS_CHANGED,
    payload: { caseId, newStatus: `S${version}` },
  };
}

async function summaries() {
  return sql<{ case_id: string; case_status: string; last_aggregate_version: number }[]>`
    select case_id, case_status, last_aggregate_version from read_model.case_summary order by case_id`;
}

async function audits() {
  return sql<{ case_id: string; before: string | null; after: string }[]>`
    select case_id, before_value ->> 'status' as before, after_value ->> 'status' as after
    from case_core.case_audit order by case_id, audit_id`;
}

async function states() {
  return sql<{ aggregate_id: string; status: string; error_code: string | null }[]>`
    select aggregate_id, status, error_code from integration.consumer_inbox order by aggregate_id, aggregate_version`;
}

/** The UPDATE statements on case_summary while `fn` runs. */
function countingUpdates(fn: () => Promise<unknown>): Promise<number> {
  return countingStatements(sql, { table: 'read_model.case_summary', event: 'update' }, fn);
}

/**
 * A drain by the worker's own role, and the plans of the statements it sent whose text holds
 * `marker` (each planned for the values it was sent with: the roles plan every execution
 * afresh).
 */
async function plansOfDrain(marker: string): Promise<string[]> {
  const sent: { query: string; parameters: unknown[] }[] = [];
  const worker = db.client({
    role: workerRoleOf(caseProjection),
    debug: (_connection, query, parameters) => {
      if (query.includes(marker)) sent.push({ query, parameters });
    },
  });
  try {
    await work(worker, caseProjection);
    const plans: string[] = [];
    for (const { query, parameters } of sent.splice(0)) {
      const rows = await worker.unsafe(`explain ${query}`, parameters as never[]);
      plans.push(rows.map((r) => r['QUERY PLAN'] as string).join('\n'));
    }
    return plans;
  } finally {
    await worker.end({ timeout: 5 });
  }
}

describe('case-projection status changes, set-based', () => {
  it('applies a batch of cases in one statement, each on top of its previous version', async () => {
    await sql`
      insert into read_model.case_summary (case_id, case_status, last_aggregate_version)
      select 'case_' || n, 'S1', 1 from generate_series(1, 20) n`;
    await insertInboxRows(
      sql,
      Array.from({ length: 20 }, (_, n) => statusChanged(`case_${n + 1}`, 2)),
    );

    const updates = await countingUpdates(() => work(asWorker, caseProjection));

    expect(updates).toBe(1);
    expect((await summaries()).every((s) => s.case_status === 'S2' && s.last_aggregate_version === 2)).toBe(true);
    expect(await audits()).toHaveLength(20);
    expect((await states()).every((s) => s.status === 'PROCESSED')).toBe(true);
  });

  it('applied, stale duplicate and first version in one statement, with the effects of one event at a time', async () => {
    await sql`
      insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values
        ('case_next', 'S1', 1), ('case_stale', 'S3', 3)`;
    await insertInboxRows(sql, [statusChanged('case_next', 2), statusChanged('case_stale', 3), statusChanged('case_first', 1)]);

    const updates = await countingUpdates(() => work(asWorker, caseProjection));

    expect(updates).toBe(1);
    expect(await summaries()).toEqual([
      { case_id: 'case_first', case_status: 'S1', last_aggregate_version: 1 },
      { case_id: 'case_next', case_status: 'S2', last_aggregate_version: 2 },
      { case_id: 'case_stale', case_status: 'S3', last_aggregate_version: 3 },
    ]);
    expect(await audits()).toEqual([
      { case_id: 'case_first', before: null, after: 'S1' },
      { case_id: 'case_next', before: 'S1', after: 'S2' },
    ]);
    expect((await states()).map((s) => s.status)).toEqual(['PROCESSED', 'PROCESSED', 'PROCESSED']);
  });

  it('a gap in the batch: one event at a time, so the gap holds only its own event', async () => {
    await sql`
      insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values
        ('case_next', 'S1', 1), ('case_stale', 'S3', 3), ('case_gap', 'S1', 1)`;
    await insertInboxRows(sql, [
      statusChanged('case_next', 2),
      statusChanged('case_stale', 3),
      statusChanged('case_first', 1),
      statusChanged('case_gap', 3),
    ]);

    await work(asWorker, caseProjection);

    expect(await summaries()).toEqual([
      { case_id: 'case_first', case_status: 'S1', last_aggregate_version: 1 },
      { case_id: 'case_gap', case_status: 'S1', last_aggregate_version: 1 },
      { case_id: 'case_next', case_status: 'S2', last_aggregate_version: 2 },
      { case_id: 'case_stale', case_status: 'S3', last_aggregate_version: 3 },
    ]);
    expect(await audits()).toEqual([
      { case_id: 'case_first', before: null, after: 'S1' },
      { case_id: 'case_next', before: 'S1', after: 'S2' },
    ]);
    expect(await states()).toEqual([
      { aggregate_id: 'case_first', status: 'PROCESSED', error_code: null },
      { aggregate_id: 'case_gap', status: 'RETRY_PENDING', error_code: ErrorCodes.AGGREGATE_VERSION_GAP },
      { aggregate_id: 'case_next', status: 'PROCESSED', error_code: null },
      { aggregate_id: 'case_stale', status: 'PROCESSED', error_code: null },
    ]);
  });

  it('a version held for its gap is due as soon as its predecessor is processed, not after the gap retry', async () => {
    expect(caseProjection.retry.versionGapRetrySeconds).toBeGreaterThanOrEqual(1);
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_late', 'S1', 1)`;
    await insertInboxRows(sql, [statusChanged('case_late', 3)]);
    await work(asWorker, caseProjection);
    const [held] = await sql<{ status: string; error_code: string; due_in: number }[]>`
      select status, error_code, extract(epoch from next_attempt_at - now())::float8 as due_in
      from integration.consumer_inbox where aggregate_id = 'case_late'`;
    expect(held).toMatchObject({ status: 'RETRY_PENDING', error_code: ErrorCodes.AGGREGATE_VERSION_GAP });
    expect(held!.due_in).toBeGreaterThan(0.5);

    // Its predecessor arrives: the same drain processes both, in version order, without
    // waiting for the held row's retry time.
    await insertInboxRows(sql, [statusChanged('case_late', 2)]);
    const result = await work(asWorker, caseProjection);

    expect(result).toMatchObject({ processed: 2 });
    expect(await summaries()).toEqual([{ case_id: 'case_late', case_status: 'S3', last_aggregate_version: 3 }]);
    expect(await audits()).toEqual([
      { case_id: 'case_late', before: 'S1', after: 'S2' },
      { case_id: 'case_late', before: 'S2', after: 'S3' },
    ]);
  });

  it('finds the held successors through the open rows of their lanes, whatever the statistics', async () => {
    // 5,000 finished rows since the last ANALYZE, each of its own aggregate.
    await insertInboxRows(
      sql,
      Array.from({ length: 5000 }, (_, n) => ({ ...statusChanged(`case_old_${n}`, 2), status: 'PROCESSED' as const })),
    );
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_plan', 'S1', 1)`;
    await insertInboxRows(sql, [statusChanged('case_plan', 2)]);
    const plans = await plansOfDrain('update integration.consumer_inbox h');

    expect(plans).toHaveLength(1);
    // One probe per processed row at its lane and next version: never a scan of the
    // consumer's open rows, of the retry index, or of the table.
    expect(plans[0]).toMatch(/Index Scan using consumer_inbox_open_lane_idx[^\n]*\n\s*Index Cond: [^\n]*aggregate_version = /);
    expect(plans[0]).not.toMatch(/Bitmap|Seq Scan on consumer_inbox|consumer_inbox_retry_idx/);
  });

  it('a held version whose predecessor is still missing keeps its retry time', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_far', 'S1', 1)`;
    await insertInboxRows(sql, [statusChanged('case_far', 4)]);
    await work(asWorker, caseProjection);
    const dueAt = async () => {
      const [r] = await sql<{ next_attempt_at: Date }[]>`
        select next_attempt_at from integration.consumer_inbox where aggregate_id = 'case_far' and aggregate_version = 4`;
      return r!.next_attempt_at.getTime();
    };
    const before = await dueAt();

    // Version 2 is processed; 4 still waits for 3.
    await insertInboxRows(sql, [statusChanged('case_far', 2)]);
    const result = await work(asWorker, caseProjection);

    expect(result).toMatchObject({ processed: 1 });
    expect(await dueAt()).toBe(before);
  });

  it('two aggregates naming one case in one batch apply in claim order, as one event at a time would', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_shared', 'S1', 1)`;
    // Different aggregates, the same case: versions 2 and 3, and a repeated 2.
    await insertInboxRows(sql, [
      { ...statusChanged('agg_a', 2, 'case_shared'), receivedSecondsAgo: 3 },
      { ...statusChanged('agg_b', 3, 'case_shared'), receivedSecondsAgo: 2 },
      { ...statusChanged('agg_c', 2, 'case_shared'), receivedSecondsAgo: 1 },
    ]);

    await work(asWorker, caseProjection);

    expect(await summaries()).toEqual([{ case_id: 'case_shared', case_status: 'S3', last_aggregate_version: 3 }]);
    expect(await audits()).toEqual([
      { case_id: 'case_shared', before: 'S1', after: 'S2' },
      { case_id: 'case_shared', before: 'S2', after: 'S3' },
    ]);
    expect((await states()).map((s) => s.status)).toEqual(['PROCESSED', 'PROCESSED', 'PROCESSED']);
  });

  it('finds its cases through the primary key, never by reading the summary table, whatever its statistics', async () => {
    // 20,000 cases inserted since the last ANALYZE: a join with the batch's input could be
    // planned as a scan of them all, once per statement.
    await sql`
      insert into read_model.case_summary (case_id, case_status, last_aggregate_version)
      select 'case_' || n, 'S1', 1 from generate_series(1, 20000) n`;
    await insertInboxRows(sql, [
      statusChanged('case_1', 2),
      statusChanged('case_2', 2),
      { aggregateId: 'case_new', eventType: CASE_ACCEPTED, payload: { caseId: 'case_new', acceptedAt: '2026-07-03T09:15:30Z' } },
    ]);
    const plans = await plansOfDrain('from read_model.case_summary s');

    expect(plans).toHaveLength(2); // one per handler: accepted's upsert, the status changes
    for (const plan of plans) {
      expect(plan).toContain('case_summary_pkey');
      expect(plan).not.toMatch(/Seq Scan on case_summary/);
    }
    expect((await states()).map((s) => s.status)).toEqual(['PROCESSED', 'PROCESSED', 'PROCESSED']);
  });
});

describe("a batch's audit entries", () => {
  /** The audit rows in the order they were written. */
  async function auditsInWrittenOrder() {
    return sql<{ case_id: string; after: string }[]>`
      select case_id, after_value ->> 'status' as after from case_core.case_audit order by audit_id`;
  }

  it('are written in one statement after the last stage, in claim order', async () => {
    await sql`
      insert into read_model.case_summary (case_id, case_status, last_aggregate_version)
      values ('case_a', 'S1', 1), ('case_b', 'S1', 1), ('case_c', 'S1', 1)`;
    // Versions 2 to 5 of three cases: one claim, a run of four per lane, four stages.
    await insertInboxRows(
      sql,
      [2, 3, 4, 5].flatMap((v) => ['case_a', 'case_b', 'case_c'].map((c) => statusChanged(c, v))),
    );

    const inserts = await countingStatements(sql, { table: 'case_core.case_audit', event: 'insert' }, async () => {
      const result = await work(asWorker, caseProjection);
      expect(result.processed).toBe(12);
    });

    expect(inserts).toBe(1); // four stages, one statement
    // Stage after stage: every case's version 2 before any version 3, and so on (within a
    // stage the cases are independent, in the order their handler returned them).
    const written = await auditsInWrittenOrder();
    const stages = [0, 3, 6, 9].map((at) => written.slice(at, at + 3).sort((x, y) => x.case_id.localeCompare(y.case_id)));
    expect(stages).toEqual([2, 3, 4, 5].map((v) => ['case_a', 'case_b', 'case_c'].map((c) => ({ case_id: c, after: `S${v}` }))));
    expect(await summaries()).toEqual(
      ['case_a', 'case_b', 'case_c'].map((c) => ({ case_id: c, case_status: 'S5', last_aggregate_version: 5 })),
    );
  });

  it('refused by the trail fail only their own row, as a failed handler would', async () => {
    await sql`
      insert into read_model.case_summary (case_id, case_status, last_aggregate_version)
      values ('case_a', 'S1', 1), ('case_b', 'S1', 1), ('case_c', 'S1', 1)`;
    await insertInboxRows(sql, [
      { ...statusChanged('case_a', 2), eventId: 'evt_a2' },
      { ...statusChanged('case_b', 2), eventId: 'evt_b2' },
      { ...statusChanged('case_c', 2), eventId: 'evt_c2' },
    ]);
    // case_b's entry is already there: the trail's unique key refuses it a second time.
    await sql`
      insert into case_core.case_audit (case_id, consumer_name, source_event_id, change)
      values ('case_b', ${caseProjection.name}, 'evt_b2', 'CASE_STATUS_CHANGED')`;

    const observability = quietObservability();
    const errors = vi.spyOn(observability.logger, 'error');

    const result = await work(asWorker, caseProjection, observability);

    expect(result).toMatchObject({ processed: 2, quarantined: 1 });
    // Found by the slow path inside the batch, not by the batch failing as a whole (which
    // would run every row again in a transaction of its own).
    expect(errors.mock.calls.map(([message]) => message)).not.toContain('worker_batch_failed');
    expect(await states()).toEqual([
      { aggregate_id: 'case_a', status: 'PROCESSED', error_code: null },
      { aggregate_id: 'case_b', status: 'QUARANTINED', error_code: ErrorCodes.DB_INTEGRITY_VIOLATION },
      { aggregate_id: 'case_c', status: 'PROCESSED', error_code: null },
    ]);
    expect(await summaries()).toEqual([
      { case_id: 'case_a', case_status: 'S2', last_aggregate_version: 2 },
      { case_id: 'case_b', case_status: 'S1', last_aggregate_version: 1 },
      { case_id: 'case_c', case_status: 'S2', last_aggregate_version: 2 },
    ]);
    expect((await audits()).map((a) => `${a.case_id} ${a.after ?? '-'}`)).toEqual(['case_a S2', 'case_b -', 'case_c S2']);
  });
});
