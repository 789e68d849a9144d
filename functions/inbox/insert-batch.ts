/**
 * Insert a batch of decoded records into the inbox with ONE statement:
 * `INSERT … SELECT … FROM json_to_recordset(…) ON CONFLICT (consumer_name, event_id) DO NOTHING`.
 *
 * - The whole batch travels as one JSON text parameter: one round trip whatever the
 *   batch size, and no 65k bind-parameter ceiling.
 * - The payload is taken by PostgreSQL from the record's own JSON text (`envelope -> 'payload'`),
 *   not re-serialized from JavaScript: numbers beyond 2^53 keep their exact value. That
 *   text was accepted by JSON.parse, so it is spliced into the parameter as a JSON value
 *   rather than escaped as a string: neither side pays to escape and unescape every payload.
 * - Rows go in ordered by event_id. Two invocations inserting overlapping batches (the ESM
 *   redelivering while a slow invocation is still running) then take their unique-index
 *   locks in the same order, so they wait for each other instead of deadlocking.
 * - RETURNING yields only the rows this statement inserted: the duplicates are the rest.
 *
 * The caller removes duplicate event ids inside one batch first (ON CONFLICT cannot
 * resolve the same key twice in one statement: SQLSTATE 21000).
 */
import type { NormalizedEnvelope } from '../consumers/envelopes';
import type { Queryable } from '../lib/db';
import type { InboxRow } from './types';

/** A decoded record: its normalized envelope plus where it came from. */
export interface InboxInsert extends NormalizedEnvelope {
  recordKey: string | null;
  recordKeyEncoding: 'utf8' | 'base64';
  topic: string;
  partition: number;
  offset: number;
  /** The record's JSON text (an object JSON.parse accepted); the row's payload is its `payload` member. */
  envelopeJson: string;
  headers: Record<string, unknown>;
}

/** Rows inserted as PROCESSING under a lease, for processing in the same transaction (inline mode). */
export interface InsertLease {
  owner: string;
  leaseSeconds: number;
}

export interface InsertedInboxRow {
  inbox_id: string;
  event_id: string;
  topic_name: string;
  partition_no: number;
  offset_no: number;
}

/** Deferred mode: rows start RECEIVED for the worker. Returns the rows that were new. */
export async function insertInboxBatch(
  q: Queryable,
  consumerName: string,
  rows: readonly InboxInsert[],
): Promise<InsertedInboxRow[]> {
  if (rows.length === 0) return [];
  return q<InsertedInboxRow[]>`
    ${insertStatement(q, consumerName, rows, null)}
    returning inbox_id, event_id, topic_name, partition_no, offset_no`;
}

/**
 * Inline mode: rows start PROCESSING, attempt 1, leased to `lease.owner`, so that the
 * caller can dispatch them and record their outcomes with completeRows() in the same
 * transaction. Returns the new rows in full (the handler needs them).
 */
export async function insertInboxBatchLeased(
  q: Queryable,
  consumerName: string,
  rows: readonly InboxInsert[],
  lease: InsertLease,
): Promise<InboxRow[]> {
  if (rows.length === 0) return [];
  return q<InboxRow[]>`
    ${insertStatement(q, consumerName, rows, lease)}
    returning *`;
}

function insertStatement(q: Queryable, consumerName: string, rows: readonly InboxInsert[], lease: InsertLease | null) {
  const records = rows.map((r) => ({
    event_id: r.eventId,
    event_type: r.eventType,
    event_version: r.eventVersion,
    aggregate_type: r.aggregateType,
    aggregate_id: r.aggregateId,
    aggregate_version: r.aggregateVersion,
    partition_key: r.partitionKey,
    record_key: r.recordKey,
    record_key_encoding: r.recordKeyEncoding,
    tenant_id: r.tenantId,
    topic_name: r.topic,
    partition_no: r.partition,
    offset_no: r.offset,
    correlation_id: r.correlationId,
    causation_id: r.causationId,
    producer: r.producer,
    occurred_at: r.occurredAt,
    headers: r.headers,
  }));
  const owner = lease?.owner ?? null;
  const leaseSeconds = lease?.leaseSeconds ?? null;
  return q`
    insert into integration.consumer_inbox (
      consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, aggregate_version,
      partition_key, record_key, record_key_encoding, tenant_id, topic_name, partition_no, offset_no,
      correlation_id, causation_id, producer, occurred_at,
      status, attempt_count, locked_by, locked_at, lease_expires_at, payload, headers)
    select ${consumerName}::text, r.event_id, r.event_type, r.event_version, r.aggregate_type, r.aggregate_id,
           r.aggregate_version, r.partition_key, r.record_key, r.record_key_encoding, r.tenant_id, r.topic_name,
           r.partition_no, r.offset_no, r.correlation_id, r.causation_id, r.producer, r.occurred_at,
           case when ${owner}::text is null then 'RECEIVED' else 'PROCESSING' end,
           case when ${owner}::text is null then 0 else 1 end,
           ${owner}::text,
           case when ${owner}::text is null then null else now() end,
           now() + make_interval(secs => ${leaseSeconds}::float8),
           -- json, not jsonb: only the payload is converted, not the whole envelope.
           (r.envelope -> 'payload')::jsonb,
           r.headers
    from json_to_recordset(${recordsetJson(records, rows)}::text::json) as r(
      event_id text, event_type text, event_version integer, aggregate_type text, aggregate_id text,
      aggregate_version bigint, partition_key text, record_key text, record_key_encoding text, tenant_id text,
      topic_name text, partition_no integer, offset_no bigint, correlation_id text, causation_id text,
      producer text, occurred_at timestamptz, headers jsonb, envelope json)
    order by r.event_id collate "C"
    on conflict (consumer_name, event_id) do nothing`;
}

/** The rows as one JSON array, each row's envelope text spliced in as its `envelope` member. */
function recordsetJson(records: readonly object[], rows: readonly InboxInsert[]): string {
  const parts = new Array<string>(records.length);
  for (let i = 0; i < records.length; i++) {
    const head = JSON.stringify(records[i]);
    parts[i] = `${head.slice(0, -1)},"envelope":${rows[i]!.envelopeJson}}`;
  }
  return `[${parts.join(',')}]`;
}
