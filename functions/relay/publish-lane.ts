/**
 * One claimed lane published: its run in outbox_seq order, one send per stretch of rows
 * bound for the same topic, each after the previous one was acknowledged; the first send
 * the producer refuses stops the lane (run-relay.ts says why).
 */
import type { OutboxOutcome } from '../outbox/complete-outbox';
import type { ClaimedOutboxLane } from '../outbox/claim-outbox';
import type { OutboxLaneRelease } from '../outbox/release-outbox-lanes';
import type { OutboxRow } from '../outbox/types';
import { SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import { scheduledDelaySeconds } from '../lib/backoff';
import { carrierOf, contextOf, tracer } from '../lib/tracing';
import { messageOf, type OutboxProducer } from './producer';

export const PUBLISH_REFUSED = 'PUBLISH_REFUSED';

export interface LaneOutcome {
  outcomes: OutboxOutcome[];
  release: OutboxLaneRelease;
  refused: { row: OutboxRow; errorCode: string } | undefined;
  outOfTime: boolean;
}

/** What publishing a lane needs: the producer, whether there is time for a send, and the backoff after a refusal. */
export interface LanePublisher {
  producer: OutboxProducer;
  hasTime: () => boolean;
  backoffSeconds: readonly number[];
  random?: (() => number) | undefined;
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

/**
 * A publish of one emitted event (OpenTelemetry's messaging conventions): a PRODUCER span,
 * child of the processing that emitted it, whose context the message carries on.
 */
function publishSpan(row: OutboxRow): Span {
  return tracer().startSpan(
    `publish ${row.topic_name}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': 'kafka',
        'messaging.operation.type': 'send',
        'messaging.destination.name': row.topic_name,
        'messaging.message.id': row.event_id,
        'messaging.kafka.message.key': row.aggregate_id,
        'inbox.consumer': row.consumer_name,
        'inbox.event_type': row.event_type,
        'inbox.source_event_id': row.source_event_id,
        'inbox.attempt': row.attempt_count + 1,
      },
    },
    contextOf(row.trace_context),
  );
}

export async function publishLane(p: LanePublisher, lane: ClaimedOutboxLane): Promise<LaneOutcome> {
  const outcomes: OutboxOutcome[] = [];
  let stopped: 'refused' | 'time' | undefined;
  let refused: LaneOutcome['refused'];
  let delaySeconds = 0;
  for (const stretch of stretches(lane.rows)) {
    if (stopped === undefined && !p.hasTime()) stopped = 'time';
    if (stopped !== undefined) {
      outcomes.push(...stretch.map((r) => ({ outboxSeq: r.outbox_seq, outcome: 'returned' as const })));
      continue;
    }
    const spans = stretch.map(publishSpan);
    try {
      await p.producer.publish(
        stretch[0]!.topic_name,
        stretch.map((row, i) => messageOf(row, carrierOf(spans[i]!.spanContext()))),
      );
      outcomes.push(...stretch.map((r) => ({ outboxSeq: r.outbox_seq, outcome: 'published' as const })));
      for (const span of spans) span.end();
    } catch (error) {
      for (const span of spans) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: PUBLISH_REFUSED });
        span.end();
      }
      const [head, ...behind] = stretch;
      delaySeconds = relayBackoffSeconds(p.backoffSeconds, head!.attempt_count + 1, p.random);
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
    release: { consumerName: lane.consumerName, aggregateType: lane.aggregateType, aggregateId: lane.aggregateId, dueInSeconds },
    refused,
    outOfTime: stopped === 'time',
  };
}
