/**
 * What a worker's batches came to, told: one log line per batch with its counts (INFO), a
 * line per row that did not succeed (WARN for a retry, ERROR for a quarantine) and per row
 * that did at DEBUG only, the counts of the run, and the outcome metrics (per batch, as they
 * happen, and the rest at the end). At INFO a batch of a hundred processed rows is one line,
 * not a hundred (docs/capacity.md, "Logs and metrics").
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { ClaimedRow } from '../inbox/claim-due';
import type { Span } from '@opentelemetry/api';
import type { RowSpans } from '../framework/row-spans';
import type { Outcome } from '../inbox/types';
import { logKeysOf } from '../lib/tracing';
import { ErrorCodes } from '../lib/errors';
import { MetricNames } from '../lib/metric-names';
import { count, MetricUnit } from '../lib/observability';
import type { BatchReport, RowResult, WorkerResult } from './batch-types';

/** Which count an outcome adds to. */
const COUNTER = {
  PROCESSED: 'processed',
  IGNORED: 'ignored',
  RETRY_PENDING: 'retried',
  QUARANTINED: 'quarantined',
} as const satisfies Record<Outcome['status'], keyof Omit<WorkerResult, 'stoppedBy'>>;

/** The outcome counts and the metric each is reported as. */
const OUTCOME_METRICS = [
  [MetricNames.EventsProcessed, 'processed'],
  [MetricNames.EventsRetried, 'retried'],
  [MetricNames.EventsQuarantined, 'quarantined'],
  [MetricNames.EventsIgnored, 'ignored'],
] as const;

/** What the outcome metrics have been given so far. */
export type OutcomeCounts = Pick<WorkerResult, 'processed' | 'retried' | 'quarantined' | 'ignored'>;

export function noOutcomes(): OutcomeCounts {
  return { processed: 0, retried: 0, quarantined: 0, ignored: 0 };
}

function logRow(logger: Logger, consumerName: string, r: RowResult, spans: RowSpans | undefined): void {
  const { row, outcome } = r;
  const line = {
    ...spans?.logKeys(row),
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
    // DB_PERMISSION: what the role was refused on (a table's name, never a value).
    ...(outcome.status === 'QUARANTINED' && typeof outcome.errorDetail?.deniedOn === 'string'
      ? { deniedOn: outcome.errorDetail.deniedOn }
      : {}),
  };
  if (outcome.status === 'QUARANTINED') logger.error('consumer_inbox_processed', line);
  else if (outcome.status === 'RETRY_PENDING') logger.warn('consumer_inbox_processed', line);
  else logger.debug('consumer_inbox_processed', line);
}

/**
 * A batch's reports added to the run: `result`'s counts, the rows lost (handed back at the
 * end), a log line per row, and each finished row's latency since it was received.
 */
export function recordReports(
  out: { result: WorkerResult; lost: ClaimedRow[] },
  tell: { logger: Logger; metrics: Metrics; consumerName: string; batchSpan?: Span; rowSpans?: RowSpans },
  reports: readonly BatchReport[],
  claimedAt: number,
): void {
  const { result, lost } = out;
  const batch = { ...noOutcomes(), released: 0, lost: 0 };
  let slowPath = false;
  let permissionDenied = 0;
  for (const report of reports) {
    result.released += report.released.length;
    result.lost += report.lost.length;
    batch.released += report.released.length;
    batch.lost += report.lost.length;
    slowPath ||= report.slowPath;
    lost.push(...report.lost);
    for (const r of report.completed) {
      logRow(tell.logger, tell.consumerName, r, tell.rowSpans);
      result[COUNTER[r.outcome.status]] += 1;
      batch[COUNTER[r.outcome.status]] += 1;
      if (r.outcome.status === 'QUARANTINED' && r.outcome.errorCode === ErrorCodes.DB_PERMISSION) permissionDenied += 1;
      if (r.outcome.status === 'PROCESSED' || r.outcome.status === 'IGNORED') {
        // Received → processed, on one clock: the database's age at claim plus our time since.
        tell.metrics.addMetric(
          MetricNames.ProcessingLatency,
          MetricUnit.Milliseconds,
          Math.round(r.row.waited_seconds * 1000 + (performance.now() - claimedAt)),
        );
      }
    }
    if (report.lost.length > 0) {
      tell.logger.warn('worker_leases_lost', { consumerName: tell.consumerName, rows: report.lost.length });
    }
  }
  // Published only when not zero: the alarm on a consumer's missing grant (cdk/constructs/alarms.ts).
  count(tell.metrics, MetricNames.PermissionDenied, permissionDenied);
  tell.logger.info('worker_batch', {
    ...logKeysOf(tell.batchSpan),
    consumerName: tell.consumerName,
    claimed: Object.values(batch).reduce((n, v) => n + v, 0),
    ...batch,
    ...(slowPath ? { slowPath } : {}),
    durationMs: Math.round(performance.now() - claimedAt),
  });
}

/** The outcome metrics for what `result` counted since `reported`, which then catches up. */
export function publishNewOutcomes(metrics: Metrics, result: WorkerResult, reported: OutcomeCounts): void {
  for (const [name, key] of OUTCOME_METRICS) {
    if (result[key] > reported[key]) count(metrics, name, result[key] - reported[key]);
    reported[key] = result[key];
  }
}

/** At the end: the rest of every outcome metric, zero included, so an invocation that processed nothing still reports it. */
export function publishRemainingOutcomes(metrics: Metrics, result: WorkerResult, reported: OutcomeCounts): void {
  for (const [name, key] of OUTCOME_METRICS) count(metrics, name, result[key] - reported[key]);
}
