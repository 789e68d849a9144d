/**
 * One claimed batch, processed in ONE transaction.
 *
 *   begin
 *     lock the batch's rows still PROCESSING under this owner (the fence; rows lost to a
 *       takeover are skipped, and the reaper cannot release the others mid-batch)
 *     walk each lane's run in order; settle what needs no database work: IGNORED, unknown
 *       type/version, invalid payload, attempt budget already spent
 *     fast path: one savepoint; the runs' rows in waves (wave k = the k-th row of every
 *       run), each wave's handlers issued at once (postgres.js pipelines them on the
 *       transaction's connection; a set-based handler gets the wave's events in one
 *       call), the next wave after the last one finished; the waves' audit entries in
 *       one statement; release
 *     slow path, only when something in the fast path failed: roll that savepoint back,
 *       run the lanes again by halves (each half a fast path in its own savepoint, a half
 *       that fails split again), and a lane that fails on its own row by row, each row in
 *       its own savepoint, so a failed row rolls back only its own effects
 *     one set-based completeRows() for every outcome; hand back what was not run; wake the
 *       batch's lanes, or hold those of runs that stopped at a quarantine (hold-aggregate)
 *   commit
 *
 * A run stops at its first row that does not succeed (retried, quarantined): the rows
 * after it are handed back untouched, their attempt refunded, behind it in their lane. A
 * wave holds one row per aggregate, so the rows of a wave never depend on each other;
 * an aggregate's rows run one wave after another, in order.
 *
 * Side effects, statuses and lanes commit together or not at all. If the transaction fails
 * as a whole (connection lost, commit refused) nothing of it is applied and the rows are
 * still PROCESSING under this owner: the caller marks them for retry, or, if the database
 * is unreachable, their leases expire and the reaper returns them. Either way a row's
 * effects are applied at most once per committed status change.
 *
 * How the rows run (each row's step, the fast path, the slow path) is run-lanes.ts; this
 * module holds the transaction around them: the fence, and the settlement it commits.
 */
import { quarantinePolicyOf } from '../framework/types';
import type { Claim, ClaimedRow } from '../inbox/claim-due';
import { completeRows } from '../inbox/complete';
import { lockOwnedRows } from '../inbox/lock-owned';
import { releaseClaimed } from '../inbox/release-claimed';
import { releaseSuccessors, type ProcessedVersion } from '../inbox/release-successors';
import { holdLanes, wakeLanes, type LaneHold, type LaneKey } from '../inbox/lanes';
import type { Outcome } from '../inbox/types';
import type { TransactionSql } from '../lib/db';
import type { BatchContext, BatchLane, BatchReport } from './batch-types';
import { failedOutcome, runLanes, stepOf, type LaneResult } from './run-lanes';

export type { BatchContext, BatchLane, BatchReport, RowResult } from './batch-types';

/** A claim's lanes as one batch. */
export function lanesOf(claim: Claim): BatchLane[] {
  return claim.lanes.map((l) => ({ ...l, rest: [] }));
}

/** The hold a run that stopped at `stoppedBy` puts on its lane, if any (quarantine policy hold-aggregate). */
function holdOf(ctx: BatchContext, lane: BatchLane, stoppedBy: Outcome | undefined): LaneHold | undefined {
  if (stoppedBy?.status !== 'QUARANTINED' || quarantinePolicyOf(ctx.consumer) !== 'hold-aggregate') return undefined;
  return { aggregateType: lane.aggregateType, aggregateId: lane.aggregateId, heldBy: stoppedBy.inboxId };
}

export async function processBatch(ctx: BatchContext, lanes: readonly BatchLane[]): Promise<BatchReport> {
  return ctx.sql.begin(async (tx) => {
    const fence = await fenceBatch(ctx, tx, lanes);
    const steps = lanes.map((l, i) => (fence.ours[i] ? l.rows.map((row) => stepOf(ctx, row)) : []));
    const { laneResults, slowPath } = await runLanes(ctx, tx, steps);
    const { applied, released } = await settle(ctx, tx, settlementOf(ctx, lanes, fence, laneResults));
    return {
      completed: laneResults.flatMap((r) => r.results).filter((r) => applied.has(r.row.inbox_id)),
      released: fence.all.filter((r) => released.has(r.inbox_id)),
      outOfTime: laneResults.some((r) => r.outOfTime),
      lost: fence.lost,
      slowPath,
      stopped: lanes.map((_, i) => laneResults[i]?.stoppedBy !== undefined),
    };
  });
}

/** The batch's rows, and which of them (and of its lanes) are still this worker's. */
interface Fence {
  all: ClaimedRow[];
  owned: Set<string>;
  lost: ClaimedRow[];
  /** Per lane: are all of its rows still ours. */
  ours: boolean[];
}

/** Lock the batch's rows still PROCESSING under this owner: the rest were lost to a takeover. */
async function fenceBatch(ctx: BatchContext, tx: TransactionSql, lanes: readonly BatchLane[]): Promise<Fence> {
  const all = lanes.flatMap((l) => [...l.rows, ...l.rest]);
  const owned = await lockOwnedRows(
    tx,
    ctx.owner,
    all.map((r) => r.inbox_id),
  );
  const lost = all.filter((r) => !owned.has(r.inbox_id));
  // A lane whose rows were taken over is no longer this worker's: leave all of it alone.
  const ours = lanes.map((l) => [...l.rows, ...l.rest].every((r) => owned.has(r.inbox_id)));
  return { all, owned, lost, ours };
}

/** What the batch writes when its rows have run: their outcomes, the rows handed back, the lanes woken or held. */
interface Settlement {
  outcomes: Outcome[];
  /** Per lane, the last version processed: a successor held for its gap is due now. */
  processed: ProcessedVersion[];
  handBack: string[];
  holds: LaneHold[];
  wakes: LaneKey[];
}

function settlementOf(ctx: BatchContext, lanes: readonly BatchLane[], fence: Fence, laneResults: readonly LaneResult[]): Settlement {
  const out: Settlement = { outcomes: [], processed: [], handBack: [], holds: [], wakes: [] };
  lanes.forEach((l, i) => {
    if (!fence.ours[i]) {
      // Partly taken over (cannot happen with one lease per claim): give back what is still ours.
      out.handBack.push(...l.rows.filter((r) => fence.owned.has(r.inbox_id)).map((r) => r.inbox_id));
      return;
    }
    const r = laneResults[i]!;
    out.outcomes.push(...r.results.map((x) => x.outcome));
    // The lane's last version processed: a row after an earlier one ran in this batch.
    const last = r.results.filter((x) => x.outcome.status === 'PROCESSED' && x.row.aggregate_version !== null).at(-1);
    if (last !== undefined) {
      out.processed.push({
        aggregateType: last.row.aggregate_type,
        aggregateId: last.row.aggregate_id,
        version: last.row.aggregate_version!,
      });
    }
    const behind = r.stoppedBy !== undefined || r.outOfTime ? [...r.handedBack, ...l.rest] : r.handedBack;
    out.handBack.push(...behind.map((row) => row.inbox_id));
    const hold = holdOf(ctx, l, r.stoppedBy);
    if (hold !== undefined) out.holds.push(hold);
    // A run that went through with more of it still to come keeps its rows in flight.
    else if (r.stoppedBy !== undefined || r.outOfTime || l.rest.length === 0) out.wakes.push(l);
  });
  return out;
}

/** The settlement written; resolves to the rows whose outcome applied and those handed back. */
async function settle(ctx: BatchContext, tx: TransactionSql, s: Settlement): Promise<{ applied: Set<string>; released: Set<string> }> {
  // Issued together, run in order: the lanes after the rows (the trigger marks the lanes
  // of rows queued again, and of successors made due; this wakes the lanes whose rows
  // waited behind the batch's).
  const [changed, released] = await Promise.all([
    completeRows(tx, ctx.owner, s.outcomes),
    releaseClaimed(tx, ctx.owner, s.handBack),
    releaseSuccessors(tx, ctx.consumer.name, s.processed),
    wakeLanes(tx, ctx.consumer.name, s.wakes),
    holdLanes(tx, ctx.consumer.name, s.holds),
  ]);
  // We hold the rows' locks, so every outcome applies; filter anyway rather than report
  // a change that did not happen.
  return { applied: new Set(changed), released: new Set(released) };
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
