import type { TraceCarrier } from '../lib/tracing';
/** The inbox row as postgres.js returns it (column names as in the table). */
export type InboxStatus = 'RECEIVED' | 'PROCESSING' | 'PROCESSED' | 'RETRY_PENDING' | 'QUARANTINED' | 'IGNORED';

export interface InboxRow {
  inbox_id: string;
  consumer_name: string;
  event_id: string;
  event_type: string;
  event_version: number;
  aggregate_type: string;
  aggregate_id: string;
  aggregate_version: number | null;
  topic_name: string;
  partition_no: number;
  offset_no: number;
  correlation_id: string | null;
  causation_id: string | null;
  producer: string;
  tenant_id: string | null;
  occurred_at: Date;
  received_at: Date;
  status: InboxStatus;
  attempt_count: number;
  next_attempt_at: Date | null;
  locked_by: string | null;
  locked_at: Date | null;
  lease_expires_at: Date | null;
  error_code: string | null;
  payload: unknown;
  /** The record's Kafka headers, decoded (insert-batch.ts); '{}' once the payload was purged. */
  headers: Record<string, unknown>;
  /** Its producer's W3C trace context (migration 0172), null when it sent none. */
  trace_context: TraceCarrier | null;
}

/** A final or retry status that a lease owner can move its PROCESSING row to. */
export type Outcome =
  | { inboxId: string; status: 'PROCESSED' | 'IGNORED' }
  | {
      inboxId: string;
      status: 'RETRY_PENDING';
      /** Seconds from the database's now() until the row is due again. */
      delaySeconds: number;
      /**
       * The failed attempt does not count against the attempt budget (a held version gap:
       * bounded by time, not attempts, so MAX_ATTEMPTS_EXCEEDED keeps meaning "kept failing").
       */
      refundAttempt?: boolean | undefined;
      errorCode: string;
      errorMessage: string;
      errorDetail?: Record<string, unknown> | undefined;
    }
  | {
      inboxId: string;
      status: 'QUARANTINED';
      errorCode: string;
      errorMessage: string;
      errorDetail?: Record<string, unknown> | undefined;
    };

/** What every dialect becomes: the columns of an inbox row that come from the envelope. */
export interface NormalizedEnvelope {
  eventId: string;
  eventType: string;
  eventVersion: number;
  /** ISO-8601 with an offset, as the producer wrote it; PostgreSQL parses it into timestamptz. */
  occurredAt: string;
  producer: string;
  correlationId: string | null;
  causationId: string | null;
  aggregateType: string;
  aggregateId: string;
  aggregateVersion: number | null;
  partitionKey: string | null;
  tenantId: string | null;
}

/** How long a consumer's rows, keys and poison are kept (the reaper's retention). */
export interface RetentionPolicy {
  /** Finished rows stay in the inbox, payload and all, this long; then they leave, their key kept. */
  payloadRetentionDays: number;
  /** A finished row's dedupe key is kept this long (at least the topic's retention); then deleted. */
  dedupeWindowDays: number;
  /** Raw poison rows are kept this long. */
  poisonRetentionDays: number;
  /**
   * Outbox rows this consumer emitted are kept this long after they were published (by
   * the relay); DEFAULT_RETENTION's when omitted. Unpublished rows are never deleted.
   */
  publishedOutboxDays?: number;
}
