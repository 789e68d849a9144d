/**
 * The worker's loop: claim → process → complete, until nothing is due or the invocation's
 * time budget is spent — or, awake (the Lambda handler's invocations, through the wake-ups
 * wing: functions/wings/wake-ups/invocation.ts), until nothing has been due for an idle
 * interval: steady traffic is drained as it arrives by a worker already running, rather
 * than by a new invocation per batch. Called by the Lambda
 * handler, the local simulator and the benchmark, each with its own dependencies.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { ROOT_CONTEXT, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { startRowSpans, type RowSpans } from '../framework/row-spans';
import type { ConsumerDeclaration } from '../framework/types';
import { claimDue, type Claim, type ClaimedRow } from '../inbox/claim-due';
import type { Config } from '../lib/config';
import type { Sql } from '../lib/db';
import { tracer } from '../lib/tracing';
import { noOutcomes, publishNewOutcomes, publishRemainingOutcomes, recordReports, type OutcomeCounts } from './batch-outcomes';
import { runClaimedBatch } from './claimed-batch';
import { NO_WORK, type BatchContext, type StopReason, type WorkerResult } from './batch-types';
import { handBackLost, lanesOf } from './process-batch';

export { NO_WORK, type StopReason, type WorkerResult } from './batch-types';

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
  /** The invocation's span: the parent of each batch's (docs/tracing.md). */
  span?: Span;
}

/**
 * How a worker stays awake, and what it does between claims: the core's seam, which the
 * wake-ups wing's invocation fills with its slot's renewal, fan-out and leave.
 */
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

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A random owner id for runs outside Lambda. */
export function newOwnerId(prefix = 'worker'): string {
  return `${prefix}:${randomUUID()}`;
}

/** A run of the loop: what it works with and what it has done so far. */
interface WorkerRun {
  deps: WorkerDependencies;
  ctx: BatchContext;
  result: WorkerResult;
  /** Rows a batch found no longer ours, handed back at the end. */
  lost: ClaimedRow[];
  totalLanes: number;
  busyMs: number;
  reported: OutcomeCounts;
  /** Claims in a row that took nothing but put lanes right. */
  emptyClaims: number;
  lastFoundAt: number;
}

function startRun(deps: WorkerDependencies): WorkerRun {
  const ctx: BatchContext = {
    sql: deps.sql,
    consumer: deps.consumer,
    owner: deps.owner ?? newOwnerId(),
    remainingMs: deps.remainingMs,
    safetyMarginMs: deps.config.worker.safetyMarginMs,
    ...(deps.random ? { random: deps.random } : {}),
  };
  const result: WorkerResult = { ...NO_WORK, stoppedBy: 'drained' };
  return { deps, ctx, result, lost: [], totalLanes: 0, busyMs: 0, reported: noOutcomes(), emptyClaims: 0, lastFoundAt: performance.now() };
}

export async function runWorker(deps: WorkerDependencies): Promise<WorkerResult> {
  const run = startRun(deps);
  try {
    for (;;) {
      const stop = await claimAndProcess(run);
      if (stop !== null) {
        run.result.stoppedBy = stop;
        break;
      }
    }
    // Rows whose lease ran out before their batch began were never started. Any still
    // PROCESSING under this owner (nobody took them over) go back now, with their lanes,
    // rather than wait for the reaper: a normal return leaves nothing it claimed in
    // PROCESSING.
    await handBackLost(run.ctx, run.lost);
  } finally {
    // Per batch, as they happen (values of one metric add up in CloudWatch), and zeros at
    // the end so an invocation that processed nothing still reports it.
    publishRemainingOutcomes(deps.metrics, run.result, run.reported);
  }
  return run.result;
}

/** One turn of the loop: a claim, and its batch when it took rows. Resolves to why the loop stops, or null to go on. */
async function claimAndProcess(run: WorkerRun): Promise<StopReason | null> {
  const { deps } = run;
  const { batchSize, safetyMarginMs, leaseSeconds } = deps.config.worker;
  // One reading per claim: the lease ends no later than this invocation does, and is
  // never shorter than the safety margin.
  const left = deps.remainingMs();
  if (left <= safetyMarginMs) return 'budget';
  if (deps.awake?.beforeClaim !== undefined && !(await deps.awake.beforeClaim())) return 'stopped';
  const lease = Math.min(leaseSeconds, left / 1000);
  const claimStarted = performance.now();
  const claim = await claimDue(deps.sql, {
    consumerName: deps.consumer.name,
    owner: run.ctx.owner,
    limit: batchSize,
    runLength: deps.config.worker.runLength,
    leaseSeconds: lease,
  });
  // Paused while this worker ran: it stops at once, rather than idle until it times out.
  if (claim.paused) return 'paused';
  if (claim.rows.length === 0) return afterEmptyClaim(run, claim, claimStarted);
  return processClaim(run, claim, claimStarted);
}

/** A claim that took nothing: claim again, wait (awake, within the idle interval), or stop. */
async function afterEmptyClaim(run: WorkerRun, claim: Claim, claimStarted: number): Promise<StopReason | null> {
  const { deps } = run;
  const { awake } = deps;
  run.busyMs += performance.now() - claimStarted;
  // Lanes whose head turned out not to be due were put right; others may be due.
  if (claim.deferredLanes > 0 && ++run.emptyClaims < MAX_EMPTY_CLAIMS) return null;
  run.emptyClaims = 0;
  if (awake === undefined) return 'drained';
  if (performance.now() - run.lastFoundAt < awake.idleMs) {
    const sleep = awake.sleep ?? defaultSleep;
    await sleep(Math.max(0, Math.min(awake.pollMs, deps.remainingMs() - deps.config.worker.safetyMarginMs)));
    return null;
  }
  if (awake.mayStop === undefined || (await awake.mayStop())) return 'idle';
  // Rows arrived since the claim: stay, and idle again from now if they are gone by the next one.
  run.lastFoundAt = performance.now();
  return null;
}

/** A claim that took rows: its batch run, recorded and reported. */
async function processClaim(run: WorkerRun, claim: Claim, claimStarted: number): Promise<StopReason | null> {
  const { deps, result } = run;
  run.emptyClaims = 0;
  const claimedAt = performance.now();
  run.lastFoundAt = claimedAt;
  result.claimed += claim.rows.length;
  run.totalLanes += claim.lanes.length;

  const { reports, failed } = await tracedBatch(run, claim, async (trace) => {
    const out = await runClaimedBatch({ ...run.ctx, trace: trace.rows }, deps.logger, lanesOf(claim));
    trace.rows.end(out.reports.flatMap((r) => r.completed));
    recordReports(
      run,
      { logger: deps.logger, metrics: deps.metrics, consumerName: deps.consumer.name, batchSpan: trace.batch, rowSpans: trace.rows },
      out.reports,
      claimedAt,
    );
    return out;
  });
  publishNewOutcomes(deps.metrics, result, run.reported);
  run.busyMs += performance.now() - claimStarted;
  await deps.awake?.afterBatch?.({
    full: claim.rows.length >= deps.config.worker.batchSize,
    totalLanes: run.totalLanes,
    busyMs: run.busyMs,
  });
  // A batch that failed as a whole for a reason worth retrying (the database, not a row)
  // will not clear up within this invocation.
  if (failed) return 'failed';
  if (reports.some((r) => r.outOfTime)) return 'budget';
  return null;
}

/**
 * A claimed batch in its span (a child of the invocation's), with a processing span per row
 * (framework/row-spans.ts), the batch linked to the rows that ran; a batch that throws
 * (the connection died) ends its span with the error and leaves its rows' spans unended.
 */
async function tracedBatch<T>(run: WorkerRun, claim: Claim, work: (trace: { batch: Span; rows: RowSpans }) => Promise<T>): Promise<T> {
  const { consumer } = run.deps;
  const batch = tracer().startSpan(
    `batch ${consumer.name}`,
    { attributes: { 'inbox.consumer': consumer.name, 'inbox.claimed': claim.rows.length, 'inbox.lanes': claim.lanes.length } },
    run.deps.span === undefined ? ROOT_CONTEXT : trace.setSpan(ROOT_CONTEXT, run.deps.span),
  );
  const rows = startRowSpans(claim.rows, batch);
  try {
    return await work({ batch, rows });
  } catch (error) {
    batch.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'Error' });
    throw error;
  } finally {
    batch.addLinks(rows.contexts().map((context) => ({ context })));
    batch.end();
  }
}

/** Claims in a row that took nothing but put lanes right before the loop stops: bounds a spin. */
const MAX_EMPTY_CLAIMS = 10;
