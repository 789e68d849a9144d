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
