/**
 * Record the records that cannot become inbox rows, with ONE statement, idempotently:
 * the unique key (consumer_name, topic_name, partition_no, offset_no) makes a redelivered
 * poison record a no-op, and the first reason recorded for an offset stands.
 *
 * Rows go in ordered by (topic, partition, offset) so that concurrent invocations take
 * their unique-index locks in the same order (see insert-batch.ts).
 */
import type { Queryable } from '../lib/db';

export interface PoisonInsert {
  topic: string;
  partition: number;
  offset: number;
  recordKey: string | null;
  recordKeyEncoding: 'utf8' | 'base64';
  /** The value as text when it is valid UTF-8 without NUL, else its base64; null for a tombstone. */
  rawValue: string | null;
  rawEncoding: 'utf8' | 'base64' | 'none';
  headers: Record<string, unknown>;
  /** A stable reason code (see docs/ingest.md). */
  errorCode: string;
  /** Field paths and rules; never a value of the record. */
  errorMessage: string;
  /** The Kafka record's timestamp in milliseconds since the epoch. */
  recordTimestampMs: number | null;
}

/** Returns how many poison rows were new (the rest were recorded by an earlier delivery). */
export async function recordPoison(q: Queryable, consumerName: string, rows: readonly PoisonInsert[]): Promise<number> {
  if (rows.length === 0) return 0;
  const records = rows.map((r) => ({
    topic_name: r.topic,
    partition_no: r.partition,
    offset_no: r.offset,
    record_key: r.recordKey,
    record_key_encoding: r.recordKeyEncoding,
    raw_value: r.rawValue,
    raw_encoding: r.rawEncoding,
    headers: r.headers,
    error_code: r.errorCode,
    error_message: r.errorMessage,
    record_timestamp_ms: r.recordTimestampMs,
  }));
  const inserted = await q`
    insert into integration.consumer_raw_poison (
      consumer_name, topic_name, partition_no, offset_no, record_key, record_key_encoding,
      raw_value, raw_encoding, headers, error_code, error_message, record_timestamp)
    select ${consumerName}::text, p.topic_name, p.partition_no, p.offset_no, p.record_key, p.record_key_encoding,
           p.raw_value, p.raw_encoding, p.headers, p.error_code, p.error_message,
           to_timestamp(p.record_timestamp_ms / 1000.0)
    from json_to_recordset(${JSON.stringify(records)}::text::json) as p(
      topic_name text, partition_no integer, offset_no bigint, record_key text, record_key_encoding text,
      raw_value text, raw_encoding text, headers jsonb, error_code text, error_message text,
      record_timestamp_ms float8)
    order by p.topic_name, p.partition_no, p.offset_no
    on conflict (consumer_name, topic_name, partition_no, offset_no) do nothing
    returning 1`;
  return inserted.count;
}
