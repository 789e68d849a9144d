/**
 * One pass of the reaper over every declared consumer (docs/design.md §8). The Lambda handler,
 * the local simulator and the tests all call runOnce; it holds no SQL (functions/inbox/).
 *
 * Order of work, most urgent first, so that a short invocation still does what matters:
 *   0. end the consumer roles' sessions whose transaction runs past the bound (they may hold
 *      the locks the rest of the run, and every consumer's functions, would wait for);
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
import { measure, type GaugePublisher } from '../lib/observability';
import { ConfigError, DEFAULTS, type Config } from '../lib/config';
import type { Queryable } from '../lib/db';
import { METRIC_DIMENSION, MetricNames } from '../lib/metric-names';
import type { ConsumerManifestEntry } from '../framework/manifest';
import { quarantinePolicyOf, type RetentionPolicy } from '../framework/types';
import { readGauges, type ConsumerGauges } from '../inbox/gauges';
import { deleteExpiredKeys, deletePoison, retireFinished } from '../inbox/purge';
import { adoptOrphans } from '../inbox/adopt-orphans';
import { releaseStaleHolds, wakeStrandedLanes } from '../inbox/lanes';
import { releaseExpired } from '../inbox/release-expired';
import { endOverrunningSessions } from '../inbox/overrunning-sessions';

export type ReaperLogger = Pick<Logger, 'info' | 'warn'>;

export interface ReaperDeps {
  sql: Queryable;
  consumers: readonly ConsumerManifestEntry[];
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
  /** Sessions of the consumer's roles ended for a transaction past the bound. */
  sessionsEnded: number;
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
  /** Sessions of consumers' roles ended for a transaction past the bound (all consumers). */
  sessionsEnded: number;
  /** False when the deadline stopped the run with work left over. */
  complete: boolean;
  consumers: ConsumerReport[];
}

/** A bounded batch of one kind of work; resolves to the number of rows it handled. */
type Batch = () => Promise<number>;

/**
 * Run each consumer's queue of batches in turn until every queue is drained (a batch came
 * back short) or time is up; a queue moves to its next kind of work when the current one is
 * drained. Round robin, so one consumer's backlog cannot starve another's. Returns true
 * when everything was drained.
 */
async function drainRoundRobin(queues: Batch[][], batchSize: number, hasTime: () => boolean): Promise<boolean> {
  const cursors = queues.map(() => 0);
  for (;;) {
    const active = queues.map((_queue, i) => i).filter((i) => cursors[i]! < queues[i]!.length);
    if (active.length === 0) return true;
    for (const i of active) {
      if (!hasTime()) return false;
      const handled = await queues[i]![cursors[i]!]!();
      if (handled < batchSize) cursors[i]! += 1;
    }
  }
}

function assertRetention(consumer: ConsumerManifestEntry): RetentionPolicy {
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
  return { consumerName, released: 0, quarantined: 0, payloadsPurged: 0, rowsDeleted: 0, poisonDeleted: 0, sessionsEnded: 0, gauges: null };
}

function publish(metrics: GaugePublisher, report: ConsumerReport): void {
  metrics.addDimension(METRIC_DIMENSION, report.consumerName);
  const added = [
    measure(metrics, MetricNames.StaleLeasesReleased, MetricUnit.Count, report.released + report.quarantined),
    measure(metrics, MetricNames.RowsPurged, MetricUnit.Count, report.rowsDeleted + report.poisonDeleted),
    measure(metrics, MetricNames.PayloadsPurged, MetricUnit.Count, report.payloadsPurged),
    measure(metrics, MetricNames.ConsumerSessionsEnded, MetricUnit.Count, report.sessionsEnded),
  ];
  if (report.gauges !== null) {
    added.push(
      measure(metrics, MetricNames.DueDepth, MetricUnit.Count, report.gauges.due_depth),
      measure(metrics, MetricNames.OldestDueAgeSeconds, MetricUnit.Seconds, report.gauges.oldest_due_age_seconds),
      measure(metrics, MetricNames.QuarantineDepth, MetricUnit.Count, report.gauges.quarantine_depth),
      measure(metrics, MetricNames.HeldDepth, MetricUnit.Count, report.gauges.held_depth),
      measure(metrics, MetricNames.PoisonLastHour, MetricUnit.Count, report.gauges.poison_last_hour),
      measure(metrics, MetricNames.ConsumerPaused, MetricUnit.Count, report.gauges.paused ? 1 : 0),
    );
  }
  // Nothing to say (no gauges read in time, nothing released or purged): no empty document.
  if (added.some(Boolean)) metrics.publishStoredMetrics();
}

/** One run's state, shared by its steps: each step adds what it did to the consumers' reports. */
interface Run {
  deps: ReaperDeps;
  policies: RetentionPolicy[];
  reports: ConsumerReport[];
  batchSize: number;
  hasTime: () => boolean;
}

/** A step of the run; resolves to false when the deadline stopped it with work left over. */
type Step = (run: Run) => Promise<boolean>;

/**
 * One pass, most urgent first: expired leases, then lanes to repair, then the gauges (after
 * the release, so released rows count as due), then retention. Every step runs in bounded
 * batches and stops before the deadline; what was done is published even when a later step
 * fails, since released leases and deletions count.
 */
export async function runOnce(deps: ReaperDeps): Promise<ReaperResult> {
  const { consumers, config, logger, metrics, remainingMs } = deps;
  const run: Run = {
    deps,
    policies: consumers.map(assertRetention),
    reports: consumers.map((c) => emptyReport(c.name)),
    batchSize: config.reaper.batchSize,
    hasTime: () => remainingMs() > config.reaper.safetyMarginMs,
  };

  let complete = true;
  try {
    for (const step of STEPS) complete = (await step(run)) && complete;
  } finally {
    for (const report of run.reports) publish(metrics, report);
  }

  const { reports } = run;
  const result: ReaperResult = {
    released: sum(reports, (r) => r.released),
    quarantined: sum(reports, (r) => r.quarantined),
    purged: sum(reports, (r) => r.rowsDeleted + r.poisonDeleted),
    payloadsPurged: sum(reports, (r) => r.payloadsPurged),
    sessionsEnded: sum(reports, (r) => r.sessionsEnded),
    complete,
    consumers: reports,
  };
  logger.info('reaper run finished', {
    released: result.released,
    quarantined: result.quarantined,
    purged: result.purged,
    payloadsPurged: result.payloadsPurged,
    sessionsEnded: result.sessionsEnded,
    complete,
  });
  return result;
}

/**
 * Sessions of consumers' roles whose transaction began more than the bound ago, ended: a
 * warning each (what went wrong, identifiers only) and a count per consumer. A retired
 * consumer's role is reported under its consumer's name too.
 */
async function endSessionsPastBound(run: Run): Promise<boolean> {
  const { sql, config, logger } = run.deps;
  if (!run.hasTime()) return false;
  const boundSeconds = config.reaper.sessionBoundSeconds ?? DEFAULTS.consumerSessionBoundSeconds;
  for (const session of await endOverrunningSessions(sql, boundSeconds)) {
    let report = run.reports.find((r) => r.consumerName === session.consumer_name);
    if (report === undefined) run.reports.push((report = emptyReport(session.consumer_name)));
    if (session.ended) report.sessionsEnded += 1;
    logger.warn('consumer session past the bound: ended', {
      consumerName: session.consumer_name,
      role: session.role_name,
      pid: session.pid,
      state: session.state,
      transactionSeconds: Math.round(session.transaction_seconds),
      boundSeconds,
      ended: session.ended,
    });
  }
  return true;
}

/** Expired leases back to RETRY_PENDING, or QUARANTINED at the attempt limit. */
async function releaseExpiredLeases(run: Run): Promise<boolean> {
  const { sql, consumers, logger } = run.deps;
  const queues = consumers.map((consumer, i): Batch[] => [
    async () => {
      const rows = await releaseExpired(sql, consumer.name, consumer.retry.maxAttempts, run.batchSize, {
        holdOnQuarantine: quarantinePolicyOf(consumer) === 'hold-aggregate',
      });
      const report = run.reports[i]!;
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
  return drainRoundRobin(queues, run.batchSize, run.hasTime);
}

/**
 * Lanes left waiting with nothing in flight, holds whose row is gone, due rows without a
 * lane. The triggers and the functions keep lanes right; anything found here came from a
 * writer that went around them.
 */
async function repairLanes(run: Run): Promise<boolean> {
  const { sql, consumers, logger } = run.deps;
  for (const consumer of consumers) {
    if (!run.hasTime()) return false;
    const woken = await wakeStrandedLanes(sql, consumer.name, run.batchSize);
    const unheld = await releaseStaleHolds(sql, consumer.name, run.batchSize);
    const adopted = await adoptOrphans(sql, consumer.name, run.batchSize);
    if (woken + unheld + adopted > 0) logger.warn('repaired lanes', { consumerName: consumer.name, woken, unheld, adopted });
  }
  return true;
}

/** The backlog gauges of every consumer, in one read. */
async function readConsumerGauges(run: Run): Promise<boolean> {
  if (!run.hasTime()) return false;
  const gauges = await readGauges(
    run.deps.sql,
    run.deps.consumers.map((c) => c.name),
  );
  for (const g of gauges) {
    const report = run.reports.find((r) => r.consumerName === g.consumer_name);
    if (report !== undefined) report.gauges = g;
  }
  return true;
}

/** Finished rows leave at their payload retention, keys go at the window's end, then old poison. */
async function applyRetention(run: Run): Promise<boolean> {
  const { sql, consumers } = run.deps;
  const queues = consumers.map((consumer, i): Batch[] => {
    const report = run.reports[i]!;
    const policy = run.policies[i]!;
    return [
      async () => {
        const n = await retireFinished(sql, consumer.name, policy, run.batchSize);
        report.payloadsPurged += n.left;
        report.rowsDeleted += n.left - n.kept;
        return n.left;
      },
      async () => {
        const n = await deleteExpiredKeys(sql, consumer.name, run.batchSize);
        report.rowsDeleted += n;
        return n;
      },
      async () => {
        const n = await deletePoison(sql, consumer.name, policy, run.batchSize);
        report.poisonDeleted += n;
        return n;
      },
    ];
  });
  return drainRoundRobin(queues, run.batchSize, run.hasTime);
}

const STEPS: readonly Step[] = [endSessionsPastBound, releaseExpiredLeases, repairLanes, readConsumerGauges, applyRetention];

function sum(reports: ConsumerReport[], f: (r: ConsumerReport) => number): number {
  return reports.reduce((total, r) => total + f(r), 0);
}
