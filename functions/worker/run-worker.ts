/**
 * The worker's loop: claim → process → complete, until nothing is due or the invocation's
 * time budget is spent — or, awake (the Lambda handler's invocations, invocation.ts), until
 * nothing has been due for an idle interval: steady traffic is drained as it arrives by a
 * worker already running, rather than by a new invocation per batch. Called by the Lambda
 * handler, the local simulator and the benchmark, each with its own dependencies.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { ConsumerDeclaration } from '../framework/types';
import { claimDue, type ClaimedRow } from '../inbox/claim-due';
import type { Outcome } from '../inbox/types';
import type { Config } from '../lib/config';
import type { Sql } from '../lib/db';
import { classifyError, ErrorCodes, isConnectionError, RetryableError } from '../lib/errors';
import { MetricNames } from '../lib/metric-names';
import { count, MetricUnit } from '../lib/observability';
import {
  failBatch,
  handBackLost,
  lanesOf,
  processBatch,
  type BatchContext,
  type BatchLane,
  type BatchReport,
  type RowResult,
} from './process-batch';

export interface WorkerDependencies {
  sql: Sql;
  consumer: ConsumerDeclaration;
  config: { worker: Config['worker'] };
  logger: Logger;
  metrics: Metrics;
  /** The lease owner; unique per invocation. A random id when omitted. */
  owner?: string;
  /** Milliseconds left in the invocation (Lambda: context.getRemainingTimeInMillis). */
  remainingMs: () => number;
  /** Jitter source, for tests. */
  random?: () => number;
  /** Stay awake after the queue runs dry (absent: stop at the first claim that finds nothing). */
  awake?: AwakeOptions;
}

/** How a worker stays awake, and what it does between claims (invocation.ts gives its slot's). */
export interface AwakeOptions {
  /** Keep claiming this long after the last claim that found rows (the invocation's start counts as one). */
  idleMs: number;
  /** Pause between claims that find nothing. */
  pollMs: number;
  /** Before every claim: false stops the worker (it no longer holds its slot). */
  beforeClaim?: () => Promise<boolean>;
  /** After every batch. */
  afterBatch?: (batch: BatchStats) => Promise<void>;
  /**
   * When the idle interval has passed: true to stop; false when work is due after all (it
   * arrived since the last claim), and the worker goes on.
   */
  mayStop?: () => Promise<boolean>;
  sleep?: (ms: number) => Promise<void>;
}

/** One claim and its batch, as the fan-out decision reads it. */
export interface BatchStats {
  /** The claim took as many rows as it may: more are probably due. */
  full: boolean;
  /** Lanes claimed and milliseconds spent claiming and processing, since the invocation began. */
  totalLanes: number;
  busyMs: number;
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

/** Which count an outcome adds to. */
const COUNTER = {
  PROCESSED: 'processed',
  IGNORED: 'ignored',
  RETRY_PENDING: 'retried',
  QUARANTINED: 'quarantined',
} as const satisfies Record<Outcome['status'], keyof Omit<WorkerResult, 'stoppedBy'>>;

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A random owner id for runs outside Lambda. */
export function newOwnerId(prefix = 'worker'): string {
  return `${prefix}:${randomUUID()}`;
}

function logRow(logger: Logger, consumerName: string, r: RowResult): void {
  const { row, outcome } = r;
  const line = {
    event: 'consumer_inbox_processed',
    consumerName,
    eventId: row.event_id,
    eventType: row.event_type,
    aggregateId: row.aggregate_id,
    topic: row.topic_name,
    partition: row.partition_no,
    offset: row.offset_no,
    correlationId: row.correlation_id,
    attemptCount: row.attempt_count,
    durationMs: Math.round(r.durationMs),
    outcome: outcome.status,
    ...(outcome.status === 'RETRY_PENDING' || outcome.status === 'QUARANTINED' ? { errorCode: outcome.errorCode } : {}),
  };
  if (outcome.status === 'QUARANTINED') logger.error('consumer_inbox_processed', line);
  else if (outcome.status === 'RETRY_PENDING') logger.warn('consumer_inbox_processed', line);
  else logger.info('consumer_inbox_processed', line);
}

export async function runWorker(deps: WorkerDependencies): Promise<WorkerResult> {
  const { sql, consumer, logger, metrics } = deps;
  const { batchSize, safetyMarginMs, leaseSeconds } = deps.config.worker;
  const owner = deps.owner ?? newOwnerId();
  const ctx: BatchContext = {
    sql,
    consumer,
    owner,
    remainingMs: deps.remainingMs,
    safetyMarginMs,
    ...(deps.random ? { random: deps.random } : {}),
  };
  const lost: ClaimedRow[] = [];
  const result: WorkerResult = {
    claimed: 0,
    processed: 0,
    retried: 0,
    quarantined: 0,
    ignored: 0,
    released: 0,
    lost: 0,
    stoppedBy: 'drained',
  };
  const { awake } = deps;
  const sleep = awake?.sleep ?? defaultSleep;
  let totalLanes = 0;
  let busyMs = 0;
  // What the outcome metrics have been given so far.
  const reported = { processed: 0, retried: 0, quarantined: 0, ignored: 0 };

  /**
   * One claimed batch. Resolves to the batch's reports and whether it failed as a whole
   * for a reason worth retrying; throws RetryableError DB_CONNECTION when the connection died.
   */
  async function runBatch(lanes: readonly BatchLane[]): Promise<{ reports: BatchReport[]; failed: boolean }> {
    try {
      return { reports: [await processBatch(ctx, lanes)], failed: false };
    } catch (error) {
      const c = classifyError(error);
      const rows = lanes.reduce((n, l) => n + l.rows.length, 0);
      logger.error('worker_batch_failed', { consumerName: consumer.name, rows, errorCode: c.code, sqlState: c.sqlState });
      if (isConnectionError(error)) {
        // The connection died under the batch: whether its COMMIT landed is unknown, and
        // the database may be failing over. Write nothing more; the rows stay PROCESSING
        // under this owner until their lease (capped at this invocation's end) expires
        // and the reaper returns them and their lanes, their attempt already counted by
        // the claim. The invocation fails, so the outage is visible rather than a quiet
        // empty run.
        throw new RetryableError(
          ErrorCodes.DB_CONNECTION,
          'database connection lost during a batch; its rows return when their leases expire',
          { cause: error },
        );
      }
      if (!c.retryable && rows > 1) {
        // Refused for its data as a whole (a deferred constraint at COMMIT): nothing says
        // which row was at fault, and quarantining them all would take the innocent rows
        // with it. Nothing committed and the rows are still ours: run each on its own, lane
        // by lane in run order, a lane's rows queued behind the one that runs.
        const reports: BatchReport[] = [];
        let failed = false;
        for (const lane of lanes) {
          const queue = [...lane.rows, ...lane.rest];
          for (let i = 0; i < queue.length; i++) {
            const one = await runBatch([{ ...lane, rows: [queue[i]!], rest: queue.slice(i + 1) }]);
            reports.push(...one.reports);
            failed ||= one.failed;
            if (one.failed || one.reports.some((r) => r.stopped[0] || r.outOfTime || r.lost.length > 0)) break;
          }
        }
        return { reports, failed };
      }
      // The batch transaction failed as a whole: none of it committed. Record the failed
      // attempt of each lane's first row and hand the rest back (fenced: a commit that did
      // land despite the error leaves nothing PROCESSING to change). If that fails too, the
      // database is unreachable: the leases expire and the reaper returns the rows.
      return { reports: [await failBatch(ctx, lanes, error)], failed: c.retryable };
    }
  }

  try {
    let emptyClaims = 0;
    let lastFoundAt = performance.now();
    for (;;) {
      // One reading per claim: the lease ends no later than this invocation does, and is
      // never shorter than the safety margin.
      const left = deps.remainingMs();
      if (left <= safetyMarginMs) {
        result.stoppedBy = 'budget';
        break;
      }
      if (awake?.beforeClaim !== undefined && !(await awake.beforeClaim())) {
        result.stoppedBy = 'stopped';
        break;
      }
      const lease = Math.min(leaseSeconds, left / 1000);
      const claimStarted = performance.now();
      const claim = await claimDue(sql, {
        consumerName: consumer.name,
        owner,
        limit: batchSize,
        runLength: deps.config.worker.runLength,
        leaseSeconds: lease,
      });
      if (claim.paused) {
        // Paused while this worker ran: it stops at once, rather than idle until it times out.
        result.stoppedBy = 'paused';
        break;
      }
      if (claim.rows.length === 0) {
        busyMs += performance.now() - claimStarted;
        // Lanes whose head turned out not to be due were put right; others may be due.
        if (claim.deferredLanes > 0 && ++emptyClaims < MAX_EMPTY_CLAIMS) continue;
        emptyClaims = 0;
        if (awake === undefined) break;
        if (performance.now() - lastFoundAt < awake.idleMs) {
          await sleep(Math.max(0, Math.min(awake.pollMs, deps.remainingMs() - safetyMarginMs)));
          continue;
        }
        if (awake.mayStop === undefined || (await awake.mayStop())) {
          result.stoppedBy = 'idle';
          break;
        }
        // Rows arrived since the claim: stay, and idle again from now if they are gone by the next one.
        lastFoundAt = performance.now();
        continue;
      }
      emptyClaims = 0;
      const claimedAt = performance.now();
      lastFoundAt = claimedAt;
      result.claimed += claim.rows.length;
      totalLanes += claim.lanes.length;

      const { reports, failed } = await runBatch(lanesOf(claim));
      for (const report of reports) {
        result.released += report.released.length;
        result.lost += report.lost.length;
        lost.push(...report.lost);
        for (const r of report.completed) {
          logRow(logger, consumer.name, r);
          result[COUNTER[r.outcome.status]] += 1;
          if (r.outcome.status === 'PROCESSED' || r.outcome.status === 'IGNORED') {
            // Received → processed, on one clock: the database's age at claim plus our time since.
            metrics.addMetric(
              MetricNames.ProcessingLatency,
              MetricUnit.Milliseconds,
              Math.round(r.row.waited_seconds * 1000 + (performance.now() - claimedAt)),
            );
          }
        }
        if (report.lost.length > 0) {
          logger.warn('worker_leases_lost', { consumerName: consumer.name, rows: report.lost.length });
        }
      }
      for (const [name, key] of OUTCOME_METRICS) {
        if (result[key] > reported[key]) count(metrics, name, result[key] - reported[key]);
        reported[key] = result[key];
      }
      busyMs += performance.now() - claimStarted;
      await awake?.afterBatch?.({ full: claim.rows.length >= batchSize, totalLanes, busyMs });
      // A batch that failed as a whole for a reason worth retrying (the database, not a row)
      // will not clear up within this invocation.
      if (failed) {
        result.stoppedBy = 'failed';
        break;
      }
      if (reports.some((r) => r.outOfTime)) {
        result.stoppedBy = 'budget';
        break;
      }
    }
    // Rows whose lease ran out before their batch began were never started. Any still
    // PROCESSING under this owner (nobody took them over) go back now, with their lanes,
    // rather than wait for the reaper: a normal return leaves nothing it claimed in
    // PROCESSING.
    await handBackLost(ctx, lost);
  } finally {
    // Per batch, as they happen (values of one metric add up in CloudWatch), and zeros at
    // the end so an invocation that processed nothing still reports it.
    for (const [name, key] of OUTCOME_METRICS) count(metrics, name, result[key] - reported[key]);
  }
  return result;
}

/** The outcome counts and the metric each is reported as. */
const OUTCOME_METRICS = [
  [MetricNames.EventsProcessed, 'processed'],
  [MetricNames.EventsRetried, 'retried'],
  [MetricNames.EventsQuarantined, 'quarantined'],
  [MetricNames.EventsIgnored, 'ignored'],
] as const;

/** Claims in a row that took nothing but put lanes right before the loop stops: bounds a spin. */
const MAX_EMPTY_CLAIMS = 10;
