/**
 * How a batch's rows run (process-batch.ts holds the transaction around them): each row's
 * step decided before anything runs, the fast path (every run's rows in waves, in one
 * savepoint) and the slow path it falls back to (the lanes by halves, a failing lane row by
 * row, each row in its own savepoint).
 */
import { performance } from 'node:perf_hooks';
import type { ConsumerDeclaration, EventHandler, InboxEvent } from '../framework/types';
import { isBatchHandler, type BatchEventHandler } from '../framework/define';
import { prepareDispatch, runBatch } from '../framework/dispatch';
import { auditBatch, type AuditBatch } from '../framework/handler-context';
import { outcomeForExhausted, outcomeForFailure } from '../framework/outcome';
import type { ClaimedRow } from '../inbox/claim-due';
import type { Outcome } from '../inbox/types';
import type { TransactionSql } from '../lib/db';
import type { BatchContext, RowResult } from './batch-types';

interface Runnable {
  row: ClaimedRow;
  run: (tx: TransactionSql, audits?: AuditBatch) => Promise<void>;
  handler: EventHandler<any>;
  event: InboxEvent;
}

/** One row of a lane's run, as far as it could be decided before running anything. */
export type Step = { kind: 'run'; runnable: Runnable } | { kind: 'settled'; result: RowResult };

function succeeded(outcome: Outcome): boolean {
  return outcome.status === 'PROCESSED' || outcome.status === 'IGNORED';
}

/** Thrown inside the fast path's savepoint to roll it back; never escapes this module. */
class FastPathFailed extends Error {}

export function failedOutcome(ctx: BatchContext, row: ClaimedRow, error: unknown): Outcome {
  return outcomeForFailure(
    ctx.consumer.retry,
    { inboxId: row.inbox_id, attempt: row.attempt_count, waitedSeconds: row.waited_seconds },
    error,
    ctx.random,
  );
}

/** Decide what can be decided without the database: IGNORED, quarantines before dispatch, exhausted attempts. */
export function stepOf(ctx: BatchContext, row: ClaimedRow): Step {
  const exhausted = outcomeForExhausted(ctx.consumer.retry, row.inbox_id, row.attempt_count);
  if (exhausted !== undefined) return { kind: 'settled', result: { row, outcome: exhausted, durationMs: 0 } };
  try {
    const prepared = prepareDispatch(ctx.consumer, row, ctx.trace?.traceOf(row) ?? row.trace_context);
    if (prepared.kind === 'ignored') {
      return { kind: 'settled', result: { row, outcome: { inboxId: row.inbox_id, status: 'IGNORED' }, durationMs: 0 } };
    }
    return { kind: 'run', runnable: { row, run: prepared.run, handler: prepared.handler, event: prepared.event } };
  } catch (error) {
    return { kind: 'settled', result: { row, outcome: failedOutcome(ctx, row, error), durationMs: 0 } };
  }
}

/**
 * The units of one wave: the events of a set-based handler together (one statement for
 * all of them), every other event on its own. The rows of a wave are of different
 * aggregates, so the units are independent of each other.
 */
function units(
  consumer: ConsumerDeclaration,
  wave: readonly Runnable[],
  audits: AuditBatch,
): { rows: ClaimedRow[]; run: (tx: TransactionSql) => Promise<void> }[] {
  const grouped = new Map<BatchEventHandler<any>, Runnable[]>();
  const out: { rows: ClaimedRow[]; run: (tx: TransactionSql) => Promise<void> }[] = [];
  for (const r of wave) {
    if (isBatchHandler(r.handler)) {
      const group = grouped.get(r.handler);
      if (group === undefined) grouped.set(r.handler, [r]);
      else group.push(r);
    } else {
      out.push({ rows: [r.row], run: (tx) => r.run(tx, audits) });
    }
  }
  for (const [handler, group] of grouped) {
    out.push({
      rows: group.map((g) => g.row),
      run: (tx) =>
        runBatch(
          consumer,
          handler,
          tx,
          group.map((g) => g.event),
          audits,
        ),
    });
  }
  return out;
}

/**
 * Every run's runnable rows, wave by wave, in one savepoint, and their audit entries in
 * one statement after the last wave (a wave's only other statement per handler). Resolves
 * to per-row durations, or undefined if anything failed (the savepoint is then rolled back).
 */
async function runFastPath(ctx: BatchContext, tx: TransactionSql, runs: readonly Runnable[][]): Promise<Map<string, number> | undefined> {
  const durations = new Map<string, number>();
  const depth = Math.max(0, ...runs.map((r) => r.length));
  const audits = auditBatch(ctx.consumer);
  try {
    await tx.savepoint(async (sp) => {
      for (let k = 0; k < depth; k++) {
        const wave = runs.flatMap((run) => (k < run.length ? [run[k]!] : []));
        // allSettled, not all: every handler must have finished issuing its statements
        // before the savepoint is rolled back, or a slow handler's later statements would
        // land outside it.
        const results = await Promise.allSettled(
          units(ctx.consumer, wave, audits).map(async ({ rows, run }) => {
            const started = performance.now();
            await run(sp);
            const elapsed = performance.now() - started;
            for (const row of rows) durations.set(row.inbox_id, elapsed);
          }),
        );
        if (results.some((r) => r.status === 'rejected')) throw new FastPathFailed();
      }
      // A refused entry (the trail's integrity check) fails the fast path like a handler
      // would: the slow path narrows it down to its row (a lane run row by row writes each
      // row's entries in that row's own savepoint).
      await audits.flush(sp).catch(() => {
        throw new FastPathFailed();
      });
    });
    return durations;
  } catch (error) {
    if (error instanceof FastPathFailed) return undefined;
    throw error;
  }
}

/** What one lane's share of the batch came to. */
export interface LaneResult {
  results: RowResult[];
  /** Not run: behind the row that stopped the run, or not started in time. */
  handedBack: ClaimedRow[];
  stoppedBy: Outcome | undefined;
  outOfTime: boolean;
}

/** The lane's steps up to and including the first settled row that does not succeed. */
function prefixOf(steps: readonly Step[]): { prefix: Step[]; rest: Step[] } {
  const stop = steps.findIndex((s) => s.kind === 'settled' && !succeeded(s.result.outcome));
  return stop < 0 ? { prefix: [...steps], rest: [] } : { prefix: steps.slice(0, stop + 1), rest: steps.slice(stop + 1) };
}

function rowOf(step: Step): ClaimedRow {
  return step.kind === 'run' ? step.runnable.row : step.result.row;
}

/** The slow path for one lane: each row in its own savepoint, in order, until one does not succeed. */
async function runLaneSlowly(ctx: BatchContext, tx: TransactionSql, steps: readonly Step[]): Promise<LaneResult> {
  const lane: LaneResult = { results: [], handedBack: [], stoppedBy: undefined, outOfTime: false };
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i]!;
    if (lane.stoppedBy !== undefined || lane.outOfTime) {
      lane.handedBack.push(rowOf(step));
      continue;
    }
    if (step.kind === 'settled') {
      lane.results.push(step.result);
      if (!succeeded(step.result.outcome)) lane.stoppedBy = step.result.outcome;
      continue;
    }
    if (ctx.remainingMs() < ctx.safetyMarginMs) {
      lane.outOfTime = true;
      lane.handedBack.push(step.runnable.row);
      continue;
    }
    const { row, run } = step.runnable;
    const started = performance.now();
    try {
      await tx.savepoint((sp) => run(sp));
      lane.results.push({ row, outcome: { inboxId: row.inbox_id, status: 'PROCESSED' }, durationMs: performance.now() - started });
    } catch (error) {
      const outcome = failedOutcome(ctx, row, error);
      lane.results.push({ row, outcome, durationMs: performance.now() - started });
      lane.stoppedBy = outcome;
    }
  }
  return lane;
}

/** A lane's fast-path result: its prefix's rows processed (or settled), the rest handed back. */
function fastLaneResult(prefix: readonly Step[], rest: readonly Step[], durations: ReadonlyMap<string, number>): LaneResult {
  const lane: LaneResult = { results: [], handedBack: rest.map(rowOf), stoppedBy: undefined, outOfTime: false };
  for (const step of prefix) {
    if (step.kind === 'settled') {
      lane.results.push(step.result);
      if (!succeeded(step.result.outcome)) lane.stoppedBy = step.result.outcome;
    } else {
      const { row } = step.runnable;
      lane.results.push({
        row,
        outcome: { inboxId: row.inbox_id, status: 'PROCESSED' },
        durationMs: durations.get(row.inbox_id) ?? 0,
      });
    }
  }
  return lane;
}

/** A lane none of whose rows was started: every row goes back as it was, attempt refunded. */
function notStarted(laneSteps: readonly Step[]): LaneResult {
  return { results: [], handedBack: laneSteps.map(rowOf), stoppedBy: undefined, outOfTime: laneSteps.length > 0 };
}

/** The lanes `lanes` (indexes) as one fast path; undefined if it failed and was rolled back. */
async function tryFastPath(
  ctx: BatchContext,
  tx: TransactionSql,
  lanes: readonly number[],
  split: readonly { prefix: Step[]; rest: Step[] }[],
  runs: readonly Runnable[][],
): Promise<LaneResult[] | undefined> {
  const own = lanes.map((i) => runs[i]!);
  const durations = own.every((r) => r.length === 0) ? new Map<string, number>() : await runFastPath(ctx, tx, own);
  return durations && lanes.map((i) => fastLaneResult(split[i]!.prefix, split[i]!.rest, durations));
}

/**
 * Is there time to narrow `lanes` down by halves after a failed run of them that took
 * `failedMs`? Each level of halves may meet the failure again (a statement timeout, a lock
 * wait), so the budget must hold about two failed runs per level; without it the lanes run
 * row by row, each row reading the time left before it starts.
 */
function roomToNarrow(ctx: BatchContext, lanes: number, failedMs: number): boolean {
  const levels = Math.ceil(Math.log2(lanes)) + 1;
  return ctx.remainingMs() - ctx.safetyMarginMs > 2 * levels * failedMs;
}

/**
 * The slow path, after the batch's fast path failed: the lanes narrowed down by halves, each
 * half a fast path of its own (its own savepoint), a half that fails split again, and a
 * single lane that fails run row by row, each row in its own savepoint. One failing lane
 * among L costs about 2·log2(L) set-based runs, not a savepoint per row of every lane. The
 * lanes run one half after the other, earlier lanes first: in claim order, what one fast
 * path would apply for lanes of independent aggregates. A failure that was slow, or a
 * budget too short to split, runs the remaining lanes row by row instead.
 */
async function runSlowPath(
  ctx: BatchContext,
  tx: TransactionSql,
  steps: readonly Step[][],
  split: readonly { prefix: Step[]; rest: Step[] }[],
  runs: readonly Runnable[][],
  failedMs: number,
): Promise<LaneResult[]> {
  const laneResults: LaneResult[] = steps.map(notStarted);
  const rowByRow = async (lanes: readonly number[]): Promise<void> => {
    for (const lane of lanes) laneResults[lane] = await runLaneSlowly(ctx, tx, steps[lane]!);
  };
  const narrow = async (lanes: readonly number[], failedMs: number): Promise<void> => {
    if (lanes.length === 1 || !roomToNarrow(ctx, lanes.length, failedMs)) return rowByRow(lanes);
    const middle = Math.ceil(lanes.length / 2);
    for (const half of [lanes.slice(0, middle), lanes.slice(middle)]) {
      // Out of time: row by row, which settles what needs no handler and hands back the rest.
      if (ctx.remainingMs() < ctx.safetyMarginMs) {
        await rowByRow(half);
        continue;
      }
      const started = performance.now();
      const results = await tryFastPath(ctx, tx, half, split, runs);
      if (results === undefined) await narrow(half, performance.now() - started);
      else half.forEach((lane, k) => (laneResults[lane] = results[k]!));
    }
  };
  await narrow(
    steps.map((_, i) => i),
    failedMs,
  );
  return laneResults;
}

/**
 * Every lane's steps, run: none when the time is up before anything ran (every row goes
 * back as it was, attempt refunded), else the fast path, and the slow path when it failed.
 */
export async function runLanes(
  ctx: BatchContext,
  tx: TransactionSql,
  steps: readonly Step[][],
): Promise<{ laneResults: LaneResult[]; slowPath: boolean }> {
  if (ctx.remainingMs() < ctx.safetyMarginMs) return { laneResults: steps.map(notStarted), slowPath: false };
  const split = steps.map(prefixOf);
  const runs = split.map(({ prefix }) => prefix.flatMap((s) => (s.kind === 'run' ? [s.runnable] : [])));
  const started = performance.now();
  const fast = await tryFastPath(
    ctx,
    tx,
    steps.map((_, i) => i),
    split,
    runs,
  );
  if (fast !== undefined) return { laneResults: fast, slowPath: false };
  return { laneResults: await runSlowPath(ctx, tx, steps, split, runs, performance.now() - started), slowPath: true };
}
