/**
 * One claimed batch, processed in ONE transaction.
 *
 *   begin
 *     lock the batch's rows still PROCESSING under this owner (the fence; rows lost to a
 *       takeover are skipped, and the reaper cannot release the others mid-batch)
 *     settle what needs no database work: IGNORED, unknown type/version, invalid payload,
 *       attempt budget already spent
 *     fast path: one savepoint, every handler issued at once (postgres.js pipelines them on
 *       the transaction's connection; a set-based handler gets all its events in one call),
 *       release
 *     slow path, only when something in the fast path failed: roll that savepoint back and
 *       run each row in its own savepoint, so a failed row rolls back only its own effects
 *     one set-based completeRows() for every outcome; release rows not started in time
 *   commit
 *
 * Side effects and statuses commit together or not at all. If the transaction fails as a
 * whole (connection lost, commit refused) nothing of it is applied and the rows are still
 * PROCESSING under this owner: the caller marks them for retry, or, if the database is
 * unreachable, their leases expire and the reaper returns them. Either way a row's effects
 * are applied at most once per committed status change.
 *
 * The fast path assumes the rows of a batch do not conflict with each other: the claim
 * takes at most one row per aggregate, and handlers touch their own aggregate's rows.
 */
import { performance } from 'node:perf_hooks';
import type { ConsumerDeclaration, EventHandler, InboxEvent } from '../consumers/types';
import { isBatchHandler, prepareDispatch, type BatchEventHandler } from '../consumers/dispatch';
import { outcomeForExhausted, outcomeForFailure } from '../consumers/outcome';
import type { ClaimedRow } from '../inbox/claim-due';
import { completeRows } from '../inbox/complete';
import { lockOwnedRows } from '../inbox/lock-owned';
import { releaseClaimed } from '../inbox/release-claimed';
import type { Outcome } from '../inbox/types';
import type { Sql, TransactionSql } from '../lib/db';

export interface RowResult {
  row: ClaimedRow;
  outcome: Outcome;
  durationMs: number;
}

export interface BatchReport {
  /** Rows whose outcome committed with the batch. */
  completed: RowResult[];
  /** Rows claimed but not started before the time budget ran out; handed back as due. */
  released: ClaimedRow[];
  /** Rows no longer ours when the batch began (lease expired and taken over): untouched. */
  lost: ClaimedRow[];
  /** True when a failure sent the batch through the per-row savepoint path. */
  slowPath: boolean;
}

export interface BatchContext {
  sql: Sql;
  consumer: ConsumerDeclaration;
  owner: string;
  /** Milliseconds left in the invocation. */
  remainingMs: () => number;
  /** Do not start a handler with less time than this left. */
  safetyMarginMs: number;
  random?: () => number;
}

interface Runnable {
  row: ClaimedRow;
  run: (tx: TransactionSql) => Promise<void>;
  handler: EventHandler<any>;
  event: InboxEvent;
}

/**
 * The fast path's units of work: the events of a set-based handler together (one
 * statement for all of them), every other event on its own.
 */
function units(runnable: readonly Runnable[]): { rows: ClaimedRow[]; run: (tx: TransactionSql) => Promise<void> }[] {
  const grouped = new Map<BatchEventHandler<any>, Runnable[]>();
  const out: { rows: ClaimedRow[]; run: (tx: TransactionSql) => Promise<void> }[] = [];
  for (const r of runnable) {
    if (isBatchHandler(r.handler)) {
      const group = grouped.get(r.handler);
      if (group === undefined) grouped.set(r.handler, [r]);
      else group.push(r);
    } else {
      out.push({ rows: [r.row], run: r.run });
    }
  }
  for (const [handler, group] of grouped) {
    out.push({ rows: group.map((g) => g.row), run: (tx) => handler.handleBatch(tx, group.map((g) => g.event)) });
  }
  return out;
}

/** Thrown inside the fast path's savepoint to roll it back; never escapes this module. */
class FastPathFailed extends Error {}

function failedOutcome(ctx: BatchContext, row: ClaimedRow, error: unknown): Outcome {
  return outcomeForFailure(
    ctx.consumer.retry,
    { inboxId: row.inbox_id, attempt: row.attempt_count, waitedSeconds: row.waited_seconds },
    error,
    ctx.random,
  );
}

/** The outcome of a whole batch whose transaction failed: each row failed with `error`. */
export function outcomesForFailedBatch(ctx: BatchContext, rows: readonly ClaimedRow[], error: unknown): Outcome[] {
  return rows.map((row) => failedOutcome(ctx, row, error));
}

/** All handlers at once in one savepoint. Resolves to per-row durations, or undefined if any failed. */
async function runFastPath(tx: TransactionSql, runnable: readonly Runnable[]): Promise<Map<string, number> | undefined> {
  const durations = new Map<string, number>();
  try {
    await tx.savepoint(async (sp) => {
      // allSettled, not all: every handler must have finished issuing its statements before
      // the savepoint is rolled back, or a slow handler's later statements would land
      // outside it.
      const results = await Promise.allSettled(
        units(runnable).map(async ({ rows, run }) => {
          const started = performance.now();
          await run(sp);
          const elapsed = performance.now() - started;
          for (const row of rows) durations.set(row.inbox_id, elapsed);
        }),
      );
      if (results.some((r) => r.status === 'rejected')) throw new FastPathFailed();
    });
    return durations;
  } catch (error) {
    if (error instanceof FastPathFailed) return undefined;
    throw error;
  }
}

export async function processBatch(ctx: BatchContext, rows: readonly ClaimedRow[]): Promise<BatchReport> {
  return ctx.sql.begin(async (tx) => {
    const owned = await lockOwnedRows(tx, ctx.owner, rows.map((r) => r.inbox_id));
    const lost = rows.filter((r) => !owned.has(r.inbox_id));
    const results: RowResult[] = [];
    const runnable: Runnable[] = [];

    for (const row of rows) {
      if (!owned.has(row.inbox_id)) continue;
      const exhausted = outcomeForExhausted(ctx.consumer.retry, row.inbox_id, row.attempt_count);
      if (exhausted !== undefined) {
        results.push({ row, outcome: exhausted, durationMs: 0 });
        continue;
      }
      try {
        const prepared = prepareDispatch(ctx.consumer, row);
        if (prepared.kind === 'ignored') results.push({ row, outcome: { inboxId: row.inbox_id, status: 'IGNORED' }, durationMs: 0 });
        else runnable.push({ row, run: prepared.run, handler: prepared.handler, event: prepared.event });
      } catch (error) {
        results.push({ row, outcome: failedOutcome(ctx, row, error), durationMs: 0 });
      }
    }

    const notStarted: ClaimedRow[] = [];
    let slowPath = false;
    if (runnable.length > 0 && ctx.remainingMs() < ctx.safetyMarginMs) {
      notStarted.push(...runnable.map((r) => r.row));
    } else if (runnable.length > 0) {
      const durations = await runFastPath(tx, runnable);
      if (durations !== undefined) {
        for (const { row } of runnable) {
          results.push({ row, outcome: { inboxId: row.inbox_id, status: 'PROCESSED' }, durationMs: durations.get(row.inbox_id) ?? 0 });
        }
      } else {
        slowPath = true;
        for (const { row, run } of runnable) {
          if (ctx.remainingMs() < ctx.safetyMarginMs) {
            notStarted.push(row);
            continue;
          }
          const started = performance.now();
          try {
            await tx.savepoint((sp) => run(sp));
            results.push({ row, outcome: { inboxId: row.inbox_id, status: 'PROCESSED' }, durationMs: performance.now() - started });
          } catch (error) {
            results.push({ row, outcome: failedOutcome(ctx, row, error), durationMs: performance.now() - started });
          }
        }
      }
    }

    const [changed, released] = await Promise.all([
      completeRows(tx, ctx.owner, results.map((r) => r.outcome)),
      releaseClaimed(tx, ctx.owner, notStarted.map((r) => r.inbox_id)),
    ]);
    // We hold the rows' locks, so every outcome applies; filter anyway rather than report
    // a change that did not happen.
    const applied = new Set(changed);
    const releasedIds = new Set(released);
    return {
      completed: results.filter((r) => applied.has(r.row.inbox_id)),
      released: notStarted.filter((r) => releasedIds.has(r.inbox_id)),
      lost,
      slowPath,
    };
  });
}
