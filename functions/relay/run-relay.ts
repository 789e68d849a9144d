/**
 * The relay's loop: claim unpublished outbox rows per aggregate → publish them in order →
 * record what was published and hand the lanes back, until nothing is due or the
 * invocation's time budget is spent; then the gauges and retention. Called by the Lambda
 * handler, the local run and the tests, each with its own producer.
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
import type { ConsumerDeclaration } from '../framework/types';
import { DEFAULT_RETENTION, emitsEvents } from '../framework/types';
import type { Config } from '../lib/config';
import type { Sql } from '../lib/db';
import { METRIC_DIMENSION, MetricNames } from '../lib/metric-names';
import { claimOutbox, type ClaimedOutboxLane } from '../outbox/claim-outbox';
import { completeOutbox, type OutboxOutcome } from '../outbox/complete-outbox';
import { readOutboxGauges, type OutboxGauges } from '../outbox/outbox-gauges';
import { deletePublishedOutbox } from '../outbox/purge-outbox';
import { releaseOutboxLanes, type OutboxLaneRelease } from '../outbox/release-outbox-lanes';
import type { OutboxRow } from '../outbox/types';
import { scheduledDelaySeconds } from '../lib/backoff';
import type { GaugePublisher } from '../lib/observability';
import { messageOf, type OutboxProducer } from './producer';

export const PUBLISH_REFUSED = 'PUBLISH_REFUSED';

export interface RelayDependencies {
  sql: Sql;
  producer: OutboxProducer;
  /** The declarations; those that emit get gauges, retention and metrics. */
  consumers: readonly ConsumerDeclaration[];
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
  /** Per emitting consumer, null when the run had no time left to read them. */
  gauges: OutboxGauges[] | null;
}

interface LaneOutcome {
  outcomes: OutboxOutcome[];
  release: OutboxLaneRelease;
  refused: { row: OutboxRow; errorCode: string } | undefined;
  outOfTime: boolean;
}

/** A random owner id for runs outside Lambda. */
export function newRelayOwnerId(prefix = 'relay'): string {
  return `${prefix}:${randomUUID()}`;
}

/** Seconds before the next try after the `attempt`-th refusal: the schedule, then its last entry, plus up to 20 % jitter. */
export function relayBackoffSeconds(schedule: readonly number[], attempt: number, random: () => number = Math.random): number {
  const base = scheduledDelaySeconds(schedule, attempt, 1);
  return base + random() * base * 0.2;
}

/** Consecutive rows bound for the same topic: one send each. */
function stretches(rows: readonly OutboxRow[]): OutboxRow[][] {
  const out: OutboxRow[][] = [];
  for (const row of rows) {
    const last = out[out.length - 1];
    if (last !== undefined && last[0]!.topic_name === row.topic_name) last.push(row);
    else out.push([row]);
  }
  return out;
}

function errorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

export async function runRelay(deps: RelayDependencies): Promise<RelayResult> {
  const { sql, producer, logger, metrics } = deps;
  const { batchSize, runLength, safetyMarginMs, leaseSeconds, purgeBatchSize, backoffSeconds } = deps.config.relay;
  const owner = deps.owner ?? newRelayOwnerId();
  const hasTime = () => deps.remainingMs() > safetyMarginMs;
  const emitting = deps.consumers.filter(emitsEvents);
  const perConsumer = new Map(emitting.map((c) => [c.name, { published: 0, refused: 0, purged: 0 }]));
  const result: RelayResult = { claimed: 0, published: 0, refused: 0, returned: 0, lost: 0, purged: 0, gauges: null };

  async function publishLane(lane: ClaimedOutboxLane): Promise<LaneOutcome> {
    const outcomes: OutboxOutcome[] = [];
    let stopped: 'refused' | 'time' | undefined;
    let refused: LaneOutcome['refused'];
    let delaySeconds = 0;
    for (const stretch of stretches(lane.rows)) {
      if (stopped === undefined && !hasTime()) stopped = 'time';
      if (stopped !== undefined) {
        outcomes.push(...stretch.map((r) => ({ outboxSeq: r.outbox_seq, outcome: 'returned' as const })));
        continue;
      }
      try {
        await producer.publish(stretch[0]!.topic_name, stretch.map(messageOf));
        outcomes.push(...stretch.map((r) => ({ outboxSeq: r.outbox_seq, outcome: 'published' as const })));
      } catch (error) {
        const [head, ...behind] = stretch;
        delaySeconds = relayBackoffSeconds(backoffSeconds, head!.attempt_count + 1, deps.random);
        outcomes.push({
          outboxSeq: head!.outbox_seq,
          outcome: 'refused',
          delaySeconds,
          errorCode: PUBLISH_REFUSED,
          errorMessage: errorText(error),
        });
        outcomes.push(...behind.map((r) => ({ outboxSeq: r.outbox_seq, outcome: 'returned' as const })));
        refused = { row: head!, errorCode: error instanceof Error ? error.name : 'Error' };
        stopped = 'refused';
      }
    }
    const dueInSeconds = stopped === 'refused' ? delaySeconds : stopped === 'time' || lane.more ? 0 : null;
    return {
      outcomes,
      release: { aggregateType: lane.aggregateType, aggregateId: lane.aggregateId, dueInSeconds },
      refused,
      outOfTime: stopped === 'time',
    };
  }

  try {
    let emptyClaims = 0;
    for (;;) {
      const left = deps.remainingMs();
      if (left <= safetyMarginMs) break;
      const claim = await claimOutbox(sql, {
        owner,
        limit: batchSize,
        runLength,
        leaseSeconds: Math.min(leaseSeconds, left / 1000),
      });
      if (claim.rows.length === 0) {
        // Lanes whose head turned out to be backing off were put right; others may be due.
        if (claim.deferredLanes > 0 && ++emptyClaims < MAX_EMPTY_CLAIMS) continue;
        break;
      }
      emptyClaims = 0;
      result.claimed += claim.rows.length;

      const lanes = await Promise.all(claim.lanes.map(publishLane));
      const outcomes = lanes.flatMap((l) => l.outcomes);
      const changed = new Set(
        await sql.begin(async (tx) => {
          const [seqs] = await Promise.all([
            completeOutbox(tx, owner, outcomes),
            releaseOutboxLanes(
              tx,
              owner,
              lanes.map((l) => l.release),
            ),
          ]);
          return seqs;
        }),
      );
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
      // Every lane refused: the brokers are likely away; the backoff brings the lanes back.
      if (lanes.every((l) => l.refused !== undefined)) break;
      if (lanes.some((l) => l.outOfTime)) break;
    }

    // Gauges first: the alarms read them every minute; retention can wait for the next run.
    if (hasTime())
      result.gauges = await readOutboxGauges(
        sql,
        emitting.map((c) => c.name),
      );
    for (const consumer of emitting) {
      const days = consumer.retention.publishedOutboxDays ?? DEFAULT_RETENTION.publishedOutboxDays!;
      for (;;) {
        if (!hasTime()) break;
        const n = await deletePublishedOutbox(sql, consumer.name, days, purgeBatchSize);
        perConsumer.get(consumer.name)!.purged += n;
        result.purged += n;
        if (n < purgeBatchSize) break;
      }
    }
  } finally {
    for (const [consumerName, counts] of perConsumer) {
      metrics.addDimension(METRIC_DIMENSION, consumerName);
      metrics.addMetric(MetricNames.OutboxEventsPublished, MetricUnit.Count, counts.published);
      metrics.addMetric(MetricNames.OutboxPublishRefused, MetricUnit.Count, counts.refused);
      metrics.addMetric(MetricNames.OutboxRowsPurged, MetricUnit.Count, counts.purged);
      const g = result.gauges?.find((x) => x.consumer_name === consumerName);
      if (g !== undefined) {
        metrics.addMetric(MetricNames.OutboxDepth, MetricUnit.Count, g.depth);
        metrics.addMetric(MetricNames.OutboxOldestUnpublishedAgeSeconds, MetricUnit.Seconds, g.oldest_unpublished_age_seconds);
      }
      metrics.publishStoredMetrics();
    }
  }
  return result;
}

/** Claims in a row that took nothing but put lanes right before the loop stops: bounds a spin. */
const MAX_EMPTY_CLAIMS = 10;
