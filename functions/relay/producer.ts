/**
 * What the relay needs of a Kafka producer, and the message it publishes for an outbox row.
 *
 * The interface is small on purpose: the MSK producer (kafka-producer.ts) implements it in
 * AWS, the local run's simulated topics (tools/local/relay.ts) implement it on this machine,
 * and tests count calls through it.
 */
import type { TraceCarrier } from '../lib/tracing';
import type { OutboxRow } from '../outbox/types';

export interface OutboxMessage {
  /** The partition key: the aggregate id, so one aggregate's events share a partition and its order. */
  key: string;
  /** The canonical envelope (docs/design.md §10), JSON. */
  value: string;
  headers: Record<string, string>;
}

export interface OutboxProducer {
  /**
   * Publish `messages` to `topic`, in this order. Resolves only when the broker has
   * acknowledged all of them (acks=all); rejects when it did not (some may have been
   * written: the relay then publishes them again, with the same event ids).
   */
  publish(topic: string, messages: readonly OutboxMessage[]): Promise<void>;
}

/** The canonical envelope of an emitted event: causation = the source event, correlation carried over. */
export function envelopeOf(row: OutboxRow): Record<string, unknown> {
  return {
    eventId: row.event_id,
    eventType: row.event_type,
    eventVersion: row.event_version,
    occurredAt: row.occurred_at.toISOString(),
    producer: row.producer,
    ...(row.correlation_id !== null ? { correlationId: row.correlation_id } : {}),
    causationId: row.source_event_id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    partitionKey: row.aggregate_id,
    payload: row.payload,
  };
}

/**
 * The message of an outbox row. `trace` is the W3C trace context it travels with (its
 * publish span's, docs/tracing.md): `traceparent` and `tracestate` headers, so that the
 * downstream consumer continues the trace.
 */
export function messageOf(row: OutboxRow, trace: TraceCarrier | null = row.trace_context): OutboxMessage {
  return {
    key: row.aggregate_id,
    value: JSON.stringify(envelopeOf(row)),
    headers: { eventId: row.event_id, eventType: row.event_type, ...(trace ?? {}) },
  };
}
