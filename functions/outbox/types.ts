import type { TraceCarrier } from '../lib/tracing';

/** An outbox row as the relay claims it (column names as in integration.outbox, migration 0081). */
export interface OutboxRow {
  outbox_seq: number;
  event_id: string;
  consumer_name: string;
  source_event_id: string;
  ordinal: number;
  topic_name: string;
  event_type: string;
  event_version: number;
  aggregate_type: string;
  aggregate_id: string;
  producer: string;
  correlation_id: string | null;
  occurred_at: Date;
  payload: Record<string, unknown>;
  /** The W3C trace context of the processing that emitted it (migration 0172); null when none. */
  trace_context: TraceCarrier | null;
  /** Refused publishes so far (the claim does not count one). */
  attempt_count: number;
}
