/**
 * Builders for the events an MSK event-source mapping sends to Lambda, for tests,
 * benchmarks and the local simulator (`npm start`).
 *
 *   const records = [
 *     mskRecord({ topic, partition: 0, offset: 10, value: { eventId: 'e1', … } }),
 *     mskRecord({ topic, partition: 0, offset: 11, value: null }),                 // tombstone
 *     mskRecord({ topic, partition: 1, offset: 7, value: Buffer.from([0xff]) }),   // raw bytes
 *     mskRecord({ topic, partition: 1, offset: 8, rawValue: 'not base64!' }),      // as the ESM would never send
 *   ];
 *   const event = mskEvent(records);  // records grouped under "<topic>-<partition>", in offset order
 *
 * The shape is AWS's (`eventSource: "aws:kafka"`, base64 `key` and `value`, headers as
 * arrays of byte values), widened to what a tombstone looks like (no value).
 */
import type { BatchItemFailure, KafkaEvent, KafkaRecord } from '../functions/ingest/types';

export type { KafkaEvent, KafkaRecord } from '../functions/ingest/types';

/** An object or array is JSON-encoded, a string is UTF-8 text, a Buffer is raw bytes, null is a tombstone. */
export type RecordValue = Record<string, unknown> | unknown[] | string | Uint8Array | null;

export interface RecordSpec {
  topic: string;
  partition: number;
  offset: number;
  value?: RecordValue;
  /** The `value` field exactly as the event carries it, bypassing encoding (e.g. invalid base64). */
  rawValue?: string;
  key?: string | Uint8Array | null;
  /** Header values as text or bytes; an array of pairs keeps order and allows a repeated name. */
  headers?: Record<string, string | Uint8Array> | Array<[string, string | Uint8Array]>;
  /** Milliseconds since the epoch (default: now). */
  timestamp?: number;
}

export const DEFAULT_EVENT_SOURCE_ARN = 'arn:aws:kafka:eu-west-1:123456789012:cluster/local/00000000-0000-0000-0000-000000000000-1';

function bytesOf(value: string | Uint8Array | Record<string, unknown> | unknown[]): Buffer {
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof Uint8Array) return Buffer.from(value);
  return Buffer.from(JSON.stringify(value), 'utf8');
}

/** base64 of a value as the ESM encodes it; undefined for a tombstone. */
export function encodeValue(value: RecordValue | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  return bytesOf(value).toString('base64');
}

export function mskRecord(spec: RecordSpec): KafkaRecord {
  const headerPairs = spec.headers === undefined ? [] : Array.isArray(spec.headers) ? spec.headers : Object.entries(spec.headers);
  const value = spec.rawValue ?? encodeValue(spec.value);
  return {
    topic: spec.topic,
    partition: spec.partition,
    offset: spec.offset,
    timestamp: spec.timestamp ?? Date.now(),
    timestampType: 'CREATE_TIME',
    ...(spec.key === undefined || spec.key === null ? {} : { key: bytesOf(spec.key).toString('base64') }),
    ...(value === undefined ? {} : { value }),
    headers: headerPairs.map(([name, v]) => ({ [name]: [...bytesOf(v)] })),
  };
}

/** The ESM's key for a record's partition: "<topic>-<partition>". */
export function partitionKeyOf(record: Pick<KafkaRecord, 'topic' | 'partition'>): string {
  return `${record.topic}-${record.partition}`;
}

/** One event from records of any partitions: grouped by partition, each group in offset order. */
export function mskEvent(
  records: readonly KafkaRecord[],
  options: { eventSourceArn?: string; bootstrapServers?: string } = {},
): KafkaEvent {
  const grouped: Record<string, KafkaRecord[]> = {};
  for (const record of records) (grouped[partitionKeyOf(record)] ??= []).push(record);
  for (const list of Object.values(grouped)) list.sort((a, b) => a.offset - b.offset);
  return {
    eventSource: 'aws:kafka',
    eventSourceArn: options.eventSourceArn ?? DEFAULT_EVENT_SOURCE_ARN,
    bootstrapServers: options.bootstrapServers ?? 'b-1.local:9098,b-2.local:9098',
    records: grouped,
  };
}

export interface SpreadSpec {
  topic: string;
  /** Number of partitions, 0…n-1. */
  partitions: number;
  count: number;
  /** The first offset in every partition (default 0). */
  firstOffset?: number;
  /** The n-th record's value (n counts across partitions from 0). */
  value: (n: number, partition: number, offset: number) => RecordValue;
  key?: (n: number, partition: number) => string | Uint8Array | null;
  headers?: (n: number) => RecordSpec['headers'];
}

/** `count` records dealt round-robin over `partitions`, offsets consecutive within each. */
export function spreadRecords(spec: SpreadSpec): KafkaRecord[] {
  const next = new Array<number>(spec.partitions).fill(spec.firstOffset ?? 0);
  const records: KafkaRecord[] = [];
  for (let n = 0; n < spec.count; n++) {
    const partition = n % spec.partitions;
    const offset = next[partition]!++;
    records.push(
      mskRecord({
        topic: spec.topic,
        partition,
        offset,
        value: spec.value(n, partition, offset),
        ...(spec.key ? { key: spec.key(n, partition) } : {}),
        ...(spec.headers ? { headers: spec.headers(n) } : {}),
      }),
    );
  }
  return records;
}

/** Every record of an event, in partition then offset order. */
export function recordsOf(event: KafkaEvent): KafkaRecord[] {
  return Object.values(event.records).flat();
}

/** A batch item failure as the handler reports it. */
export function batchItemFailure(topic: string, partition: number, offset: number): BatchItemFailure {
  return { itemIdentifier: { partition: `${topic}-${partition}`, offset } };
}
