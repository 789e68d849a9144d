/**
 * The shapes the worker's modules pass to each other: a batch's context, its lanes and
 * report (process-batch.ts, run-lanes.ts), and what a worker's loop comes to (run-worker.ts,
 * batch-outcomes.ts). Types only, so that every module can name them without importing the
 * module that produces them.
 */
import type { ConsumerDeclaration } from '../framework/types';
import type { RowSpans } from '../framework/row-spans';
import type { ClaimedRow } from '../inbox/claim-due';
import type { Outcome } from '../inbox/types';
import type { Sql } from '../lib/db';

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

export interface BatchReport {
  /** Rows whose outcome committed with the batch. */
  completed: RowResult[];
  /** Rows handed back without being run: not started in time, or behind a row of their run that did not succeed. */
  released: ClaimedRow[];
  /** True when the time budget ran out before some rows were started. */
  outOfTime: boolean;
  /** Rows no longer ours when the batch began (lease expired and taken over): untouched. */
  lost: ClaimedRow[];
  /** True when a failure in the fast path sent the batch through the slow path (by halves, then row by row). */
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
  /** The batch's rows' processing spans (framework/row-spans.ts): the context each handler runs in. */
  trace?: RowSpans;
}

/** Why the loop ended. */
export type StopReason =
  /** A claim found nothing due (not awake). */
  | 'drained'
  /** Awake, and nothing was due for the idle interval. */
  | 'idle'
  /** The time budget ran out (less than the safety margin left, or a batch stopped short of it). */
  | 'budget'
  /** A batch failed as a whole for a reason worth retrying (the database). */
  | 'failed'
  /** beforeClaim said stop. */
  | 'stopped'
  /** The consumer's processing is paused (ops pause): the claim took nothing. */
  | 'paused';

export interface WorkerResult {
  claimed: number;
  processed: number;
  retried: number;
  quarantined: number;
  ignored: number;
  /** Claimed but not started before the time budget ran out; handed back as due. */
  released: number;
  /** Taken over by another owner after this worker's lease expired; left untouched. */
  lost: number;
  stoppedBy: StopReason;
}

/** A worker's counts before it has done anything: where a result starts, and what one that never claimed reports. */
export const NO_WORK: Readonly<Omit<WorkerResult, 'stoppedBy'>> = {
  claimed: 0,
  processed: 0,
  retried: 0,
  quarantined: 0,
  ignored: 0,
  released: 0,
  lost: 0,
};
