/**
 * Insert a batch of decoded records into the inbox with ONE statement:
 * `INSERT … SELECT … FROM json_to_recordset(…) WHERE NOT EXISTS (kept key)
 *  ON CONFLICT (consumer_name, event_id) DO NOTHING`.
 *
 * - The whole batch travels as two text parameters, zipped row by row with ROWS FROM: the
 *   columns as one JSON array (json_to_recordset), and the records' own JSON texts joined
 *   by U+001E (string_to_table). One round trip whatever the batch size, no 65k
 *   bind-parameter ceiling.
 * - The payload is taken by PostgreSQL from the record's own JSON text (`envelope::jsonb ->
 *   'payload'`), not re-serialized from JavaScript: numbers beyond 2^53 keep their exact
 *   value. Keeping the envelopes out of the JSON array matters: PostgreSQL's JSON lexer
 *   would otherwise walk every envelope byte once for the array and once more for `->`
 *   before jsonb parses the payload; split on a separator, each envelope is parsed once.
 *   U+001E can never occur in JSON text that JSON.parse accepted (a raw control character
 *   is refused inside strings and is not whitespace outside them), so the split is exact.
 * - Rows go in ordered by event_id. Two invocations inserting overlapping batches (the ESM
 *   redelivering while a slow invocation is still running) then take their unique-index
 *   locks in the same order, so they wait for each other instead of deadlocking.
 * - An event is a duplicate while its key is in either table: the inbox's unique key while
 *   the row is there, integration.consumed_events once the row has left at its payload
 *   retention (until the dedupe window ends; docs/reaper.md). The anti-join is one primary
 *   key probe per record. A key moved there while this statement runs is caught by the
 *   table's trigger (migration 0110), which refuses the statement as a serialization
 *   failure: a transient error, so the batch is redelivered and meets the key.
 * - RETURNING covers only the rows this statement inserted: the duplicates are the rest.
 * - Queued rows mark their aggregates' lanes in the same statement: the table's trigger
 *   does it for every insert (migration 0050), so a row is never queued without the lane
 *   the worker's claim finds it by.
 *
 * The caller removes duplicate event ids inside one batch first (ON CONFLICT cannot
 * resolve the same key twice in one statement: SQLSTATE 21000).
 */
import type { NormalizedEnvelope } from './types';
import type { Queryable } from '../lib/db';
import type { TraceCarrier } from '../lib/tracing';
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
  /** Its producer's W3C trace context (lib/tracing.ts), null when it sent none or a malformed one. */
  traceContext: TraceCarrier | null;
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
export async function insertInboxBatch(q: Queryable, consumerName: string, rows: readonly InboxInsert[]): Promise<InsertedInboxRow[]> {
  if (rows.length === 0) return [];
  return q<InsertedInboxRow[]>`
    ${insertStatement(q, consumerName, rows, null)}
    returning inbox_id, event_id, topic_name, partition_no, offset_no`;
}

/**
 * Deferred mode when only the number of new rows matters (the ingest function): no
 * RETURNING, the command tag ("INSERT 0 n") counts the rows this statement inserted.
 * Sending back and parsing 500 rows of ids cost about 1 ms a batch.
 */
export async function insertInboxBatchCount(q: Queryable, consumerName: string, rows: readonly InboxInsert[]): Promise<number> {
  if (rows.length === 0) return 0;
  return (await insertStatement(q, consumerName, rows, null)).count;
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

/** Between two records' JSON texts in the envelopes parameter; see the top of this file. */
const SEPARATOR = '\u001e';

function insertStatement(q: Queryable, consumerName: string, rows: readonly InboxInsert[], lease: InsertLease | null) {
  const records = new Array<object>(rows.length);
  const envelopes = new Array<string>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    // Cannot happen for text JSON.parse accepted; checked because a stray separator would
    // shift every later payload onto the wrong row.
    if (r.envelopeJson.includes(SEPARATOR)) throw new Error(`record ${r.topic}-${r.partition}@${r.offset}: JSON text holds U+001E`);
    envelopes[i] = r.envelopeJson;
    records[i] = {
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
      trace_context: r.traceContext,
    };
  }
  const owner = lease?.owner ?? null;
  const leaseSeconds = lease?.leaseSeconds ?? null;
  return q`
    insert into integration.consumer_inbox (
      consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, aggregate_version,
      partition_key, record_key, record_key_encoding, tenant_id, topic_name, partition_no, offset_no,
      correlation_id, causation_id, producer, occurred_at,
      status, attempt_count, locked_by, locked_at, lease_expires_at, payload, headers, trace_context)
    select ${consumerName}::text, r.event_id, r.event_type, r.event_version, r.aggregate_type, r.aggregate_id,
           r.aggregate_version, r.partition_key, r.record_key, r.record_key_encoding, r.tenant_id, r.topic_name,
           r.partition_no, r.offset_no, r.correlation_id, r.causation_id, r.producer, r.occurred_at,
           case when ${owner}::text is null then 'RECEIVED' else 'PROCESSING' end,
           case when ${owner}::text is null then 0 else 1 end,
           ${owner}::text,
           case when ${owner}::text is null then null else now() end,
           now() + make_interval(secs => ${leaseSeconds}::float8),
           r.envelope::jsonb -> 'payload',
           r.headers,
           r.trace_context
    from rows from (
      json_to_recordset(${JSON.stringify(records)}::text::json) as (
        event_id text, event_type text, event_version integer, aggregate_type text, aggregate_id text,
        aggregate_version bigint, partition_key text, record_key text, record_key_encoding text, tenant_id text,
        topic_name text, partition_no integer, offset_no bigint, correlation_id text, causation_id text,
        producer text, occurred_at timestamptz, headers jsonb, trace_context jsonb),
      string_to_table(${envelopes.join(SEPARATOR)}::text, ${SEPARATOR}::text)
    ) as r(
      event_id, event_type, event_version, aggregate_type, aggregate_id, aggregate_version, partition_key,
      record_key, record_key_encoding, tenant_id, topic_name, partition_no, offset_no, correlation_id,
      causation_id, producer, occurred_at, headers, trace_context, envelope)
    where not exists (
      select 1 from integration.consumed_events c
      where c.consumer_name = ${consumerName}::text and c.event_id = r.event_id)
    order by r.event_id collate "C"
    on conflict (consumer_name, event_id) do nothing`;
}
