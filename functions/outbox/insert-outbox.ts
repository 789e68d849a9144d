/**
 * Emit: insert outbox rows in the processing transaction (HandlerContext.emit). One
 * statement for all of a handler call's events, in the order given (their outbox_seq
 * order, which is the order the relay publishes an aggregate's events in). The lane
 * trigger (migration 0081) marks each aggregate's lane for the relay.
 *
 * An event id already present is left as it is (ON CONFLICT DO NOTHING): the id is
 * derived from the emission (event-id.ts), so an existing row IS this event, emitted by an
 * earlier processing of the same row, and possibly published already.
 */
import type { Queryable } from '../lib/db';
import type { TraceCarrier } from '../lib/tracing';

export interface OutboxInsert {
  eventId: string;
  consumerName: string;
  sourceEventId: string;
  ordinal: number;
  topic: string;
  eventType: string;
  eventVersion: number;
  aggregateType: string;
  aggregateId: string;
  producer: string;
  correlationId: string | null;
  payload: Record<string, unknown>;
  /** The processing span's W3C trace context, which the relay publishes as headers. */
  traceContext: TraceCarrier | null;
}

/** Resolves to the event ids inserted (an id already present is not among them). */
export async function insertOutbox(q: Queryable, events: readonly OutboxInsert[]): Promise<string[]> {
  if (events.length === 0) return [];
  const rows = events.map((e, i) => ({
    n: i,
    event_id: e.eventId,
    consumer_name: e.consumerName,
    source_event_id: e.sourceEventId,
    ordinal: e.ordinal,
    topic_name: e.topic,
    event_type: e.eventType,
    event_version: e.eventVersion,
    aggregate_type: e.aggregateType,
    aggregate_id: e.aggregateId,
    producer: e.producer,
    correlation_id: e.correlationId,
    payload: e.payload,
    trace_context: e.traceContext,
  }));
  const inserted = await q<{ event_id: string }[]>`
    insert into integration.outbox (
      event_id, consumer_name, source_event_id, ordinal, topic_name, event_type, event_version,
      aggregate_type, aggregate_id, producer, correlation_id, payload, trace_context)
    select r.event_id, r.consumer_name, r.source_event_id, r.ordinal, r.topic_name, r.event_type, r.event_version,
           r.aggregate_type, r.aggregate_id, r.producer, r.correlation_id, r.payload, r.trace_context
    from json_to_recordset(${JSON.stringify(rows)}::text::json) as r(
      n int, event_id uuid, consumer_name text, source_event_id text, ordinal int, topic_name text,
      event_type text, event_version int, aggregate_type text, aggregate_id text, producer text,
      correlation_id text, payload jsonb, trace_context jsonb)
    order by r.n
    on conflict (event_id) do nothing
    returning event_id::text`;
  return inserted.map((r) => r.event_id);
}
