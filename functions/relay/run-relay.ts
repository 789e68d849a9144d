/**
 * The relay's loop: claim unpublished outbox rows per aggregate → publish them in order →
 * record what was published and hand the lanes back, until nothing is due or the
 * invocation's time budget is spent; then the gauges and retention. Called by the Lambda
 * handler, the local run and the tests, each with its own producer.
 *
 * A run serves one emitting consumer: it claims that consumer's lanes only, and reads and
 * purges that consumer's rows. Its function connects as the consumer's relay role
 * (inbox_relay_<consumer>), whose row-level security policies hold it to the same rows
 * (migration 0160): another consumer's events are neither published, held back nor marked
 * by it.
 *
 * Per lane (one aggregate), the claimed run is published in outbox_seq order, in one send
 * per stretch of rows bound for the same topic, each send after the previous one was
 * acknowledged. The first send the producer refuses stops the lane: its first row is the
 * head, counted as refused and due again after a backoff; the rows behind it go back
 * untouched, so nothing of the aggregate overtakes it. Lanes are independent and publish
 * concurrently.
 *
 * Delivery is at least once: a relay that dies after the broker acknowledged a send but
 * before its completion committed leaves the rows claimed; when its lease expires the next
 * claim takes the lane over and publishes them again, under the same event ids, which the
 * consumers' inboxes deduplicate. Nothing is marked published that was not acknowledged.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { ConsumerManifestEntry } from '../framework/manifest';
import { DEFAULT_RETENTION } from '../framework/types';
import type { Config } from '../lib/config';
import type { Sql } from '../lib/db';
import { METRIC_DIMENSION, MetricNames } from '../lib/metric-names';
import { claimOutbox, type OutboxClaim } from '../outbox/claim-outbox';
import { completeOutbox, type OutboxOutcome } from '../outbox/complete-outbox';
import { readOutboxGauges, type OutboxGauges } from '../outbox/outbox-gauges';
import { deletePublishedOutbox } from '../outbox/purge-outbox';
import { releaseOutboxLanes } from '../outbox/release-outbox-lanes';
import { measure, type GaugePublisher } from '../lib/observability';
import type { OutboxProducer } from './producer';
import { publishLane, type LaneOutcome, type LanePublisher } from './publish-lane';

export interface RelayDependencies {
  sql: Sql;
  producer: OutboxProducer;
  /** The emitting consumer this relay serves: its lanes, gauges, retention and metrics. */
  consumer: ConsumerManifestEntry;
  config: { relay: Config['relay'] };
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  metrics: GaugePublisher;
  /** The lane owner; unique per invocation. A random id when omitted. */
  owner?: string;
  /** Milliseconds left in the invocation (Lambda: context.getRemainingTimeInMillis). */
  remainingMs: () => number;
  /** Jitter source, for tests. */
  random?: () => number;
}

export interface RelayResult {
  claimed: number;
  published: number;
  /** Heads the producer refused: due again after a backoff. */
  refused: number;
  /** Claimed but not attempted (behind a refused head, or out of time): handed back. */
  returned: number;
  /** Rows whose lane was taken over before this relay recorded them (its lease expired). */
  lost: number;
  /** Published rows deleted by retention. */
  purged: number;
  /** The consumer's (one entry), null when the run had no time left to read them. */
  gauges: OutboxGauges[] | null;
}

/** A random owner id for runs outside Lambda. */
export function newRelayOwnerId(prefix = 'relay'): string {
  return `${prefix}:${randomUUID()}`;
}

/** Counts of one emitting consumer, published as its metrics at the end. */
interface ConsumerCounts {
  published: number;
  refused: number;
  purged: number;
}

/** A run of the relay: what it works with and what it has done so far. */
interface RelayRun {
  deps: RelayDependencies;
  owner: string;
  hasTime: () => boolean;
  perConsumer: Map<string, ConsumerCounts>;
  result: RelayResult;
  lanePublisher: LanePublisher;
}

/**
 * One pass: publish what is due, then the gauges (the alarms read them every minute), then
 * retention (it can wait for the next run); the metrics per emitting consumer at the end,
 * whatever happened.
 */
export async function runRelay(deps: RelayDependencies): Promise<RelayResult> {
  const { safetyMarginMs, backoffSeconds } = deps.config.relay;
  const hasTime = () => deps.remainingMs() > safetyMarginMs;
  const { consumer } = deps;
  const run: RelayRun = {
    deps,
    owner: deps.owner ?? newRelayOwnerId(),
    hasTime,
    perConsumer: new Map([[consumer.name, { published: 0, refused: 0, purged: 0 }]]),
    result: { claimed: 0, published: 0, refused: 0, returned: 0, lost: 0, purged: 0, gauges: null },
    lanePublisher: { producer: deps.producer, hasTime, backoffSeconds, random: deps.random },
  };
  try {
    await publishDue(run);
    if (hasTime()) run.result.gauges = await readOutboxGauges(deps.sql, [consumer.name]);
    await deletePublished(run);
  } finally {
    publishMetrics(run);
  }
  return run.result;
}

/** Claim and publish until nothing is due, time is up, or every lane of a claim was refused. */
async function publishDue(run: RelayRun): Promise<void> {
  const { deps } = run;
  const { batchSize, runLength, safetyMarginMs, leaseSeconds } = deps.config.relay;
  let emptyClaims = 0;
  for (;;) {
    const left = deps.remainingMs();
    if (left <= safetyMarginMs) return;
    const claim = await claimOutbox(deps.sql, {
      owner: run.owner,
      consumerName: deps.consumer.name,
      limit: batchSize,
      runLength,
      leaseSeconds: Math.min(leaseSeconds, left / 1000),
    });
    if (claim.rows.length === 0) {
      // Lanes whose head turned out to be backing off were put right; others may be due.
      if (claim.deferredLanes > 0 && ++emptyClaims < MAX_EMPTY_CLAIMS) continue;
      return;
    }
    emptyClaims = 0;
    run.result.claimed += claim.rows.length;
    const lanes = await publishClaim(run, claim);
    // Every lane refused: the brokers are likely away; the backoff brings the lanes back.
    if (lanes.every((l) => l.refused !== undefined)) return;
    if (lanes.some((l) => l.outOfTime)) return;
  }
}

/** A claim's lanes published concurrently, what they did recorded in one transaction, and counted. */
async function publishClaim(run: RelayRun, claim: OutboxClaim): Promise<LaneOutcome[]> {
  const { sql, logger } = run.deps;
  const lanes = await Promise.all(claim.lanes.map((lane) => publishLane(run.lanePublisher, lane)));
  const outcomes = lanes.flatMap((l) => l.outcomes);
  const changed = new Set(
    await sql.begin(async (tx) => {
      const [seqs] = await Promise.all([
        completeOutbox(tx, run.owner, outcomes),
        releaseOutboxLanes(
          tx,
          run.owner,
          lanes.map((l) => l.release),
        ),
      ]);
      return seqs;
    }),
  );
  const lost = countOutcomes(run, claim, outcomes, changed);
  for (const { refused } of lanes) {
    if (refused === undefined) continue;
    logger.warn('outbox_publish_refused', {
      consumerName: refused.row.consumer_name,
      eventId: refused.row.event_id,
      eventType: refused.row.event_type,
      topic: refused.row.topic_name,
      aggregateId: refused.row.aggregate_id,
      attempt: refused.row.attempt_count + 1,
      errorCode: refused.errorCode,
    });
  }
  // Taken over after this relay's lease expired: the new owner publishes them (again).
  if (lost > 0) logger.warn('outbox_lanes_lost', { rows: lost });
  return lanes;
}

/** The recorded outcomes counted, in all and per consumer; resolves to those not recorded (lost). */
function countOutcomes(
  run: RelayRun,
  claim: OutboxClaim,
  outcomes: readonly OutboxOutcome[],
  changed: ReadonlySet<OutboxOutcome['outboxSeq']>,
): number {
  const { result, perConsumer } = run;
  const rowsBySeq = new Map(claim.rows.map((r) => [r.outbox_seq, r]));
  const lost = outcomes.filter((o) => !changed.has(o.outboxSeq)).length;
  result.lost += lost;
  for (const o of outcomes) {
    if (!changed.has(o.outboxSeq)) continue;
    const counts = perConsumer.get(rowsBySeq.get(o.outboxSeq)!.consumer_name);
    if (o.outcome === 'published') {
      result.published += 1;
      if (counts) counts.published += 1;
    } else if (o.outcome === 'refused') {
      result.refused += 1;
      if (counts) counts.refused += 1;
    } else {
      result.returned += 1;
    }
  }
  return lost;
}

/** Retention: the consumer's published rows past its retention, in batches while there is time. */
async function deletePublished(run: RelayRun): Promise<void> {
  const { sql, consumer } = run.deps;
  const { purgeBatchSize } = run.deps.config.relay;
  const days = consumer.retention.publishedOutboxDays ?? DEFAULT_RETENTION.publishedOutboxDays!;
  for (;;) {
    if (!run.hasTime()) break;
    const n = await deletePublishedOutbox(sql, consumer.name, days, purgeBatchSize);
    run.perConsumer.get(consumer.name)!.purged += n;
    run.result.purged += n;
    if (n < purgeBatchSize) break;
  }
}

/** One EMF document for the consumer: its counts and, when read, its gauges. */
function publishMetrics(run: RelayRun): void {
  const { metrics } = run.deps;
  for (const [consumerName, counts] of run.perConsumer) {
    metrics.addDimension(METRIC_DIMENSION, consumerName);
    metrics.addMetric(MetricNames.OutboxEventsPublished, MetricUnit.Count, counts.published);
    measure(metrics, MetricNames.OutboxPublishRefused, MetricUnit.Count, counts.refused);
    measure(metrics, MetricNames.OutboxRowsPurged, MetricUnit.Count, counts.purged);
    const g = run.result.gauges?.find((x) => x.consumer_name === consumerName);
    if (g !== undefined) {
      metrics.addMetric(MetricNames.OutboxDepth, MetricUnit.Count, g.depth);
      metrics.addMetric(MetricNames.OutboxOldestUnpublishedAgeSeconds, MetricUnit.Seconds, g.oldest_unpublished_age_seconds);
    }
    metrics.publishStoredMetrics();
  }
}

/** Claims in a row that took nothing but put lanes right before the loop stops: bounds a spin. */
const MAX_EMPTY_CLAIMS = 10;
