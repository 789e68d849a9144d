/**
 * One claimed batch, processed in ONE transaction.
 *
 *   begin
 *     lock the batch's rows still PROCESSING under this owner (the fence; rows lost to a
 *       takeover are skipped, and the reaper cannot release the others mid-batch)
 *     walk each lane's run in order; settle what needs no database work: IGNORED, unknown
 *       type/version, invalid payload, attempt budget already spent
 *     fast path: one savepoint; the runs' rows in stages (stage k = the k-th row of every
 *       run), each stage's handlers issued at once (postgres.js pipelines them on the
 *       transaction's connection; a set-based handler gets the stage's events in one
 *       call), the next stage after the last one finished; release
 *     slow path, only when something in the fast path failed: roll that savepoint back and
 *       run each row in its own savepoint, lane by lane in run order, so a failed row rolls
 *       back only its own effects
 *     one set-based completeRows() for every outcome; hand back what was not run; wake the
 *       batch's lanes, or hold those of runs that stopped at a quarantine (hold-aggregate)
 *   commit
 *
 * A run stops at its first row that does not succeed (retried, quarantined): the rows
 * after it are handed back untouched, their attempt refunded, behind it in their lane. A
 * stage holds one row per aggregate, so the rows of a stage never depend on each other;
 * an aggregate's rows run one stage after another, in order.
 *
 * Side effects, statuses and lanes commit together or not at all. If the transaction fails
 * as a whole (connection lost, commit refused) nothing of it is applied and the rows are
 * still PROCESSING under this owner: the caller marks them for retry, or, if the database
 * is unreachable, their leases expire and the reaper returns them. Either way a row's
 * effects are applied at most once per committed status change.
 */
import { performance } from 'node:perf_hooks';
import { quarantinePolicyOf, type ConsumerDeclaration, type EventHandler, type InboxEvent } from '../framework/types';
import { prepareDispatch, runBatch } from '../framework/dispatch';
import { isBatchHandler, type BatchEventHandler } from '../framework/define';
import { outcomeForExhausted, outcomeForFailure } from '../framework/outcome';
import type { Claim, ClaimedRow } from '../inbox/claim-due';
import { completeRows } from '../inbox/complete';
import { lockOwnedRows } from '../inbox/lock-owned';
import { releaseClaimed } from '../inbox/release-claimed';
import { holdLanes, wakeLanes, type LaneHold, type LaneKey } from '../inbox/lanes';
import type { Outcome } from '../inbox/types';
import type { Sql, TransactionSql } from '../lib/db';

export interface RowResult {
  row: ClaimedRow;
  outcome: Outcome;
  durationMs: number;
}

/**
 * A lane's share of one batch: `rows` to process now, in order; `rest` claimed with them
 * and queued behind them (the per-row fallback processes a run one row per transaction).
 */
export interface BatchLane {
  aggregateType: string;
  aggregateId: string;
  rows: ClaimedRow[];
  rest: ClaimedRow[];
}

/** A claim's lanes as one batch. */
export function lanesOf(claim: Claim): BatchLane[] {
  return claim.lanes.map((l) => ({ ...l, rest: [] }));
}

export interface BatchReport {
  /** Rows whose outcome committed with the batch. */
  completed: RowResult[];
  /** Rows handed back without being run: not started in time, or behind a row of their run that did not succeed. */
  released: ClaimedRow[];
  /** True when the time budget ran out before some rows were started. */
  outOfTime: boolean;
  /** Rows no longer ours when the batch began (lease expired and taken over): untouched. */
  lost: ClaimedRow[];
  /** True when a failure sent the batch through the per-row savepoint path. */
  slowPath: boolean;
  /** Per lane, in the batch's order: did its run stop at a row that did not succeed. */
  stopped: boolean[];
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

/** One row of a lane's run, as far as it could be decided before running anything. */
type Step = { kind: 'run'; runnable: Runnable } | { kind: 'settled'; result: RowResult };

function succeeded(outcome: Outcome): boolean {
  return outcome.status === 'PROCESSED' || outcome.status === 'IGNORED';
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

/** Decide what can be decided without the database: IGNORED, quarantines before dispatch, exhausted attempts. */
function stepOf(ctx: BatchContext, row: ClaimedRow): Step {
  const exhausted = outcomeForExhausted(ctx.consumer.retry, row.inbox_id, row.attempt_count);
  if (exhausted !== undefined) return { kind: 'settled', result: { row, outcome: exhausted, durationMs: 0 } };
  try {
    const prepared = prepareDispatch(ctx.consumer, row);
    if (prepared.kind === 'ignored') {
      return { kind: 'settled', result: { row, outcome: { inboxId: row.inbox_id, status: 'IGNORED' }, durationMs: 0 } };
    }
    return { kind: 'run', runnable: { row, run: prepared.run, handler: prepared.handler, event: prepared.event } };
  } catch (error) {
    return { kind: 'settled', result: { row, outcome: failedOutcome(ctx, row, error), durationMs: 0 } };
  }
}

/**
 * The units of one stage: the events of a set-based handler together (one statement for
 * all of them), every other event on its own. The rows of a stage are of different
 * aggregates, so the units are independent of each other.
 */
function units(
  consumer: ConsumerDeclaration,
  stage: readonly Runnable[],
): { rows: ClaimedRow[]; run: (tx: TransactionSql) => Promise<void> }[] {
  const grouped = new Map<BatchEventHandler<any>, Runnable[]>();
  const out: { rows: ClaimedRow[]; run: (tx: TransactionSql) => Promise<void> }[] = [];
  for (const r of stage) {
    if (isBatchHandler(r.handler)) {
      const group = grouped.get(r.handler);
      if (group === undefined) grouped.set(r.handler, [r]);
      else group.push(r);
    } else {
      out.push({ rows: [r.row], run: r.run });
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
        ),
    });
  }
  return out;
}

/**
 * Every run's runnable rows, stage by stage, in one savepoint. Resolves to per-row
 * durations, or undefined if anything failed (the savepoint is then rolled back).
 */
async function runFastPath(ctx: BatchContext, tx: TransactionSql, runs: readonly Runnable[][]): Promise<Map<string, number> | undefined> {
  const durations = new Map<string, number>();
  const depth = Math.max(0, ...runs.map((r) => r.length));
  try {
    await tx.savepoint(async (sp) => {
      for (let k = 0; k < depth; k++) {
        const stage = runs.flatMap((run) => (k < run.length ? [run[k]!] : []));
        // allSettled, not all: every handler must have finished issuing its statements
        // before the savepoint is rolled back, or a slow handler's later statements would
        // land outside it.
        const results = await Promise.allSettled(
          units(ctx.consumer, stage).map(async ({ rows, run }) => {
            const started = performance.now();
            await run(sp);
            const elapsed = performance.now() - started;
            for (const row of rows) durations.set(row.inbox_id, elapsed);
          }),
        );
        if (results.some((r) => r.status === 'rejected')) throw new FastPathFailed();
      }
    });
    return durations;
  } catch (error) {
    if (error instanceof FastPathFailed) return undefined;
    throw error;
  }
}

/** What one lane's share of the batch came to. */
interface LaneResult {
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

/** The hold a run that stopped at `stoppedBy` puts on its lane, if any (quarantine policy hold-aggregate). */
function holdOf(ctx: BatchContext, lane: BatchLane, stoppedBy: Outcome | undefined): LaneHold | undefined {
  if (stoppedBy?.status !== 'QUARANTINED' || quarantinePolicyOf(ctx.consumer) !== 'hold-aggregate') return undefined;
  return { aggregateType: lane.aggregateType, aggregateId: lane.aggregateId, heldBy: stoppedBy.inboxId };
}

export async function processBatch(ctx: BatchContext, lanes: readonly BatchLane[]): Promise<BatchReport> {
  return ctx.sql.begin(async (tx) => {
    const all = lanes.flatMap((l) => [...l.rows, ...l.rest]);
    const owned = await lockOwnedRows(
      tx,
      ctx.owner,
      all.map((r) => r.inbox_id),
    );
    const lost = all.filter((r) => !owned.has(r.inbox_id));

    // A lane whose rows were taken over is no longer this worker's: leave all of it alone.
    const ours = lanes.map((l) => [...l.rows, ...l.rest].every((r) => owned.has(r.inbox_id)));
    const steps = lanes.map((l, i) => (ours[i] ? l.rows.map((row) => stepOf(ctx, row)) : []));

    const laneResults: LaneResult[] = [];
    let slowPath = false;
    if (ctx.remainingMs() < ctx.safetyMarginMs) {
      // Out of time before anything ran: every row goes back as it was, attempt refunded.
      for (const laneSteps of steps) {
        laneResults.push({ results: [], handedBack: laneSteps.map(rowOf), stoppedBy: undefined, outOfTime: laneSteps.length > 0 });
      }
    } else {
      const split = steps.map(prefixOf);
      const runs = split.map(({ prefix }) => prefix.flatMap((s) => (s.kind === 'run' ? [s.runnable] : [])));
      const durations = runs.every((r) => r.length === 0) ? new Map<string, number>() : await runFastPath(ctx, tx, runs);
      if (durations !== undefined) {
        for (const { prefix, rest } of split) {
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
          laneResults.push(lane);
        }
      } else {
        slowPath = true;
        for (const laneSteps of steps) laneResults.push(await runLaneSlowly(ctx, tx, laneSteps));
      }
    }

    const outcomes: Outcome[] = [];
    const handBack: string[] = [];
    const holds: LaneHold[] = [];
    const wakes: LaneKey[] = [];
    lanes.forEach((l, i) => {
      if (!ours[i]) {
        // Partly taken over (cannot happen with one lease per claim): give back what is still ours.
        handBack.push(...l.rows.filter((r) => owned.has(r.inbox_id)).map((r) => r.inbox_id));
        return;
      }
      const r = laneResults[i]!;
      outcomes.push(...r.results.map((x) => x.outcome));
      const behind = r.stoppedBy !== undefined || r.outOfTime ? [...r.handedBack, ...l.rest] : r.handedBack;
      handBack.push(...behind.map((row) => row.inbox_id));
      const hold = holdOf(ctx, l, r.stoppedBy);
      if (hold !== undefined) holds.push(hold);
      // A run that went through with more of it still to come keeps its rows in flight.
      else if (r.stoppedBy !== undefined || r.outOfTime || l.rest.length === 0) wakes.push(l);
    });

    // Issued together, run in order: the lanes after the rows (the trigger marks the lanes
    // of rows queued again; this wakes the lanes whose rows waited behind the batch's).
    const [changed, released] = await Promise.all([
      completeRows(tx, ctx.owner, outcomes),
      releaseClaimed(tx, ctx.owner, handBack),
      wakeLanes(tx, ctx.consumer.name, wakes),
      holdLanes(tx, ctx.consumer.name, holds),
    ]);
    // We hold the rows' locks, so every outcome applies; filter anyway rather than report
    // a change that did not happen.
    const applied = new Set(changed);
    const releasedIds = new Set(released);
    return {
      completed: laneResults.flatMap((r) => r.results).filter((r) => applied.has(r.row.inbox_id)),
      released: all.filter((r) => releasedIds.has(r.inbox_id)),
      outOfTime: laneResults.some((r) => r.outOfTime),
      lost,
      slowPath,
      stopped: lanes.map((_, i) => laneResults[i]?.stoppedBy !== undefined),
    };
  });
}

/**
 * A batch whose transaction failed as a whole with `error` (nothing of it committed): each
 * lane's first row records the failed attempt, the rows behind it are handed back untouched,
 * and (under hold-aggregate) a quarantined head holds its lane, in one transaction. Fenced like everything else: if the
 * failed batch's commit did land after all, nothing is PROCESSING under this owner any more
 * and nothing changes.
 */
export async function failBatch(ctx: BatchContext, lanes: readonly BatchLane[], error: unknown): Promise<BatchReport> {
  return ctx.sql.begin(async (tx) => {
    const heads = lanes
      .filter((l) => l.rows.length > 0)
      .map((lane) => ({ lane, row: lane.rows[0]!, outcome: failedOutcome(ctx, lane.rows[0]!, error) }));
    const behind = lanes.flatMap((l) => [...l.rows.slice(1), ...l.rest]);
    const holds = heads.flatMap(({ lane, outcome }) => holdOf(ctx, lane, outcome) ?? []);
    const held = new Set(holds.map((h) => h.heldBy));
    const [changed, released] = await Promise.all([
      completeRows(
        tx,
        ctx.owner,
        heads.map((h) => h.outcome),
      ),
      releaseClaimed(
        tx,
        ctx.owner,
        behind.map((r) => r.inbox_id),
      ),
      wakeLanes(
        tx,
        ctx.consumer.name,
        heads.filter((h) => !held.has(h.row.inbox_id)).map((h) => h.lane),
      ),
      holdLanes(tx, ctx.consumer.name, holds),
    ]);
    const applied = new Set(changed);
    const releasedIds = new Set(released);
    return {
      completed: heads.filter((h) => applied.has(h.row.inbox_id)).map(({ row, outcome }) => ({ row, outcome, durationMs: 0 })),
      released: behind.filter((r) => releasedIds.has(r.inbox_id)),
      outOfTime: false,
      lost: [],
      slowPath: false,
      stopped: lanes.map(() => true),
    };
  });
}

/**
 * Rows a batch found no longer ours (lease expired before it began). Those still PROCESSING
 * under this owner, because nobody took them over, go back as they were (attempt refunded);
 * their lanes follow. The rest belong to whoever took them.
 */
export async function handBackLost(ctx: BatchContext, rows: readonly ClaimedRow[]): Promise<void> {
  if (rows.length === 0) return;
  await releaseClaimed(
    ctx.sql,
    ctx.owner,
    rows.map((r) => r.inbox_id),
  );
}
