/**
 * One pass of the reaper over every declared consumer (docs/design.md §8). The Lambda handler,
 * the local simulator and the tests all call runOnce; it holds no SQL (functions/inbox/).
 *
 * Order of work, most urgent first, so that a short invocation still does what matters:
 *   1. release expired leases (a crashed worker's rows come back without an operator);
 *      then repair lanes a writer left inconsistent (rarely any);
 *   2. read the backlog gauges (one cheap statement; alarms depend on them every minute);
 *   3. retention: finished rows past the payload retention leave the inbox (their key
 *      kept until the dedupe window ends), keys past the window are forgotten, old poison
 *      is deleted.
 * Steps 1 and 3 run in bounded batches, one batch per consumer in turn, so one consumer's
 * huge backlog cannot starve another's, and no batch starts once the invocation is within
 * REAPER_SAFETY_MARGIN_MS of its deadline: what is left waits for the next minute's run.
 * The metrics are published per consumer at the end, one EMF document each (a Metrics
 * instance carries one set of dimensions per flush).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { GaugePublisher } from '../lib/observability';
import { ConfigError, type Config } from '../lib/config';
import type { Queryable } from '../lib/db';
import { METRIC_DIMENSION, MetricNames } from '../lib/metric-names';
import { quarantinePolicyOf, type ConsumerDeclaration, type RetentionPolicy } from '../consumers/types';
import { readGauges, type ConsumerGauges } from '../inbox/gauges';
import { deleteExpiredKeys, deletePoison, retireFinished } from '../inbox/purge';
import { adoptOrphans } from '../inbox/adopt-orphans';
import { releaseStaleHolds, wakeStrandedLanes } from '../inbox/lanes';
import { releaseExpired } from '../inbox/release-expired';

export type ReaperLogger = Pick<Logger, 'info' | 'warn'>;

export interface ReaperDeps {
  sql: Queryable;
  consumers: readonly ConsumerDeclaration[];
  config: { reaper: Config['reaper'] };
  logger: ReaperLogger;
  metrics: GaugePublisher;
  /** Milliseconds left in this invocation (Lambda: context.getRemainingTimeInMillis). */
  remainingMs: () => number;
}

export interface ConsumerReport {
  consumerName: string;
  /** Expired leases returned to RETRY_PENDING. */
  released: number;
  /** Expired leases whose attempt was the last: QUARANTINED MAX_ATTEMPTS_EXCEEDED. */
  quarantined: number;
  /** Finished rows that left the inbox at their payload retention. */
  payloadsPurged: number;
  /** Dedupe keys forgotten: deleted at the end of their window, or never kept (a row that left after it). */
  rowsDeleted: number;
  poisonDeleted: number;
  /** Null when the run had no time left to read them. */
  gauges: ConsumerGauges | null;
}

export interface ReaperResult {
  released: number;
  quarantined: number;
  /** Dedupe keys forgotten (past the dedupe window) and old poison rows deleted. */
  purged: number;
  /** Finished rows that left the inbox (payload gone, key kept until the window ends). */
  payloadsPurged: number;
  /** False when the deadline stopped the run with work left over. */
  complete: boolean;
  consumers: ConsumerReport[];
}

/** A bounded batch of one kind of work; resolves to the number of rows it handled. */
type Batch = () => Promise<number>;

/**
 * Run each lane's batches in turn until every lane is drained (a batch came back short)
 * or time is up. A lane moves to its next kind of work when the current one is drained.
 * Returns true when everything was drained.
 */
async function drainRoundRobin(lanes: Batch[][], batchSize: number, hasTime: () => boolean): Promise<boolean> {
  const cursors = lanes.map(() => 0);
  for (;;) {
    const active = lanes.map((lane, i) => i).filter((i) => cursors[i]! < lanes[i]!.length);
    if (active.length === 0) return true;
    for (const i of active) {
      if (!hasTime()) return false;
      const handled = await lanes[i]![cursors[i]!]!();
      if (handled < batchSize) cursors[i]! += 1;
    }
  }
}

function assertRetention(consumer: ConsumerDeclaration): RetentionPolicy {
  const p = consumer.retention;
  const wholeDays = (n: number, min: number) => Number.isInteger(n) && n >= min;
  if (!wholeDays(p.payloadRetentionDays, 0) || !wholeDays(p.dedupeWindowDays, 1) || !wholeDays(p.poisonRetentionDays, 1)) {
    throw new ConfigError(
      `Invalid retention for consumer "${consumer.name}": payloadRetentionDays >= 0, dedupeWindowDays >= 1 and poisonRetentionDays >= 1 must be whole days`,
    );
  }
  return p;
}

function emptyReport(consumerName: string): ConsumerReport {
  return { consumerName, released: 0, quarantined: 0, payloadsPurged: 0, rowsDeleted: 0, poisonDeleted: 0, gauges: null };
}

function publish(metrics: GaugePublisher, report: ConsumerReport): void {
  metrics.addDimension(METRIC_DIMENSION, report.consumerName);
  metrics.addMetric(MetricNames.StaleLeasesReleased, MetricUnit.Count, report.released + report.quarantined);
  metrics.addMetric(MetricNames.RowsPurged, MetricUnit.Count, report.rowsDeleted + report.poisonDeleted);
  metrics.addMetric(MetricNames.PayloadsPurged, MetricUnit.Count, report.payloadsPurged);
  if (report.gauges !== null) {
    metrics.addMetric(MetricNames.DueDepth, MetricUnit.Count, report.gauges.due_depth);
    metrics.addMetric(MetricNames.OldestDueAgeSeconds, MetricUnit.Seconds, report.gauges.oldest_due_age_seconds);
    metrics.addMetric(MetricNames.QuarantineDepth, MetricUnit.Count, report.gauges.quarantine_depth);
    metrics.addMetric(MetricNames.HeldDepth, MetricUnit.Count, report.gauges.held_depth);
    metrics.addMetric(MetricNames.PoisonLastHour, MetricUnit.Count, report.gauges.poison_last_hour);
    metrics.addMetric(MetricNames.ConsumerPaused, MetricUnit.Count, report.gauges.paused ? 1 : 0);
  }
  metrics.publishStoredMetrics();
}

export async function runOnce(deps: ReaperDeps): Promise<ReaperResult> {
  const { sql, consumers, config, logger, metrics, remainingMs } = deps;
  const { batchSize, safetyMarginMs } = config.reaper;
  const hasTime = () => remainingMs() > safetyMarginMs;
  const policies = consumers.map(assertRetention);
  const reports = consumers.map((c) => emptyReport(c.name));

  let complete: boolean;
  // Publish what was done even when a later step fails: released leases and purges count.
  try {
    // 1. Expired leases.
    const releaseWork = consumers.map((consumer, i): Batch[] => [
      async () => {
        const rows = await releaseExpired(sql, consumer.name, consumer.retry.maxAttempts, batchSize, {
          holdOnQuarantine: quarantinePolicyOf(consumer) === 'hold-aggregate',
        });
        const report = reports[i]!;
        for (const row of rows) {
          if (row.status === 'QUARANTINED') {
            report.quarantined += 1;
            logger.warn('expired lease at max attempts: quarantined', {
              consumerName: consumer.name,
              eventId: row.event_id,
              inboxId: row.inbox_id,
              attempt: row.attempt_count,
              staleLockedBy: row.stale_locked_by,
            });
          } else {
            report.released += 1;
          }
        }
        if (rows.length > 0) {
          const owners = [...new Set(rows.map((r) => r.stale_locked_by))].slice(0, 10);
          logger.warn('released expired leases', { consumerName: consumer.name, rows: rows.length, staleLockedBy: owners });
        }
        return rows.length;
      },
    ]);
    complete = await drainRoundRobin(releaseWork, batchSize, hasTime);

    // 1b. Lanes: left waiting with nothing in flight, holds whose row is gone, missing for due
    // rows. The triggers and the functions keep lanes right; anything found here came from
    // a writer that went around them.
    for (const consumer of consumers) {
      if (!hasTime()) {
        complete = false;
        break;
      }
      const woken = await wakeStrandedLanes(sql, consumer.name, batchSize);
      const unheld = await releaseStaleHolds(sql, consumer.name, batchSize);
      const adopted = await adoptOrphans(sql, consumer.name, batchSize);
      if (woken + unheld + adopted > 0) logger.warn('repaired lanes', { consumerName: consumer.name, woken, unheld, adopted });
    }

    // 2. Gauges, after the release so that released rows count as due.
    if (hasTime()) {
      const gauges = await readGauges(
        sql,
        consumers.map((c) => c.name),
      );
      for (const g of gauges) {
        const report = reports.find((r) => r.consumerName === g.consumer_name);
        if (report !== undefined) report.gauges = g;
      }
    } else {
      complete = false;
    }

    // 3. Retention.
    const retentionLanes = consumers.map((consumer, i): Batch[] => {
      const report = reports[i]!;
      const policy = policies[i]!;
      return [
        async () => {
          const n = await retireFinished(sql, consumer.name, policy, batchSize);
          report.payloadsPurged += n.left;
          report.rowsDeleted += n.left - n.kept;
          return n.left;
        },
        async () => {
          const n = await deleteExpiredKeys(sql, consumer.name, batchSize);
          report.rowsDeleted += n;
          return n;
        },
        async () => {
          const n = await deletePoison(sql, consumer.name, policy, batchSize);
          report.poisonDeleted += n;
          return n;
        },
      ];
    });
    complete = (await drainRoundRobin(retentionLanes, batchSize, hasTime)) && complete;
  } finally {
    for (const report of reports) publish(metrics, report);
  }

  const result: ReaperResult = {
    released: sum(reports, (r) => r.released),
    quarantined: sum(reports, (r) => r.quarantined),
    purged: sum(reports, (r) => r.rowsDeleted + r.poisonDeleted),
    payloadsPurged: sum(reports, (r) => r.payloadsPurged),
    complete,
    consumers: reports,
  };
  logger.info('reaper run finished', {
    released: result.released,
    quarantined: result.quarantined,
    purged: result.purged,
    payloadsPurged: result.payloadsPurged,
    complete,
  });
  return result;
}

function sum(reports: ConsumerReport[], f: (r: ConsumerReport) => number): number {
  return reports.reduce((total, r) => total + f(r), 0);
}
