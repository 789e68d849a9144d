/**
 * Raw poison rows, for operators: list (keyset-paged, without the raw value), show one
 * (with it), and mark one resolved after it was re-ingested.
 */
import type { Queryable } from '../../lib/db';
import { toPage } from './quarantine';

export interface PoisonSummaryRow {
  poison_id: string;
  consumer_name: string;
  topic_name: string;
  partition_no: number;
  offset_no: number;
  record_key: string | null;
  error_code: string | null;
  error_message: string;
  raw_encoding: 'utf8' | 'base64' | 'none';
  /** Size of the stored raw value in characters; the value itself is only in `show`. */
  raw_length: number | null;
  record_timestamp: Date | null;
  created_at: Date;
  resolved_at: Date | null;
  resolved_inbox_id: string | null;
  resolved_by: string | null;
}

export interface PoisonRow extends Omit<PoisonSummaryRow, 'raw_length'> {
  record_key_encoding: 'utf8' | 'base64';
  raw_value: string | null;
  headers: unknown;
}

export interface PoisonCursor {
  at: string;
  id: string;
}

export interface PoisonListOptions {
  consumerName?: string | undefined;
  /** Include rows already resolved (default: unresolved only). */
  includeResolved?: boolean | undefined;
  after?: PoisonCursor | undefined;
  limit: number;
}

export interface PoisonPage {
  rows: PoisonSummaryRow[];
  next: PoisonCursor | null;
}

/** Poison rows, newest first, keyset-paged on (created_at, poison_id). */
export async function listPoison(q: Queryable, options: PoisonListOptions): Promise<PoisonPage> {
  const rows = await q<(PoisonSummaryRow & { sort_at: string })[]>`
    select poison_id, consumer_name, topic_name, partition_no, offset_no, record_key, error_code,
           error_message, raw_encoding, length(raw_value) as raw_length, record_timestamp, created_at,
           resolved_at, resolved_inbox_id, resolved_by,
           to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as sort_at
    from integration.consumer_raw_poison
    where true
      ${options.consumerName !== undefined ? q`and consumer_name = ${options.consumerName}` : q``}
      ${options.includeResolved === true ? q`` : q`and resolved_at is null`}
      ${
        options.after !== undefined
          ? q`and (created_at, poison_id) < (${options.after.at}::text::timestamptz, ${options.after.id}::uuid)`
          : q``
      }
    order by created_at desc, poison_id desc
    limit ${options.limit + 1}`;
  return toPage(rows, options.limit, (r) => r.poison_id);
}

function poisonColumns(q: Queryable) {
  return q`poison_id, consumer_name, topic_name, partition_no, offset_no, record_key, record_key_encoding, raw_value,
    raw_encoding, headers, error_code, error_message, record_timestamp, created_at,
    resolved_at, resolved_inbox_id, resolved_by`;
}

/** One poison row with its raw value, or undefined. `forUpdate` locks it for a re-ingest. */
export async function getPoison(q: Queryable, poisonId: string, forUpdate = false): Promise<PoisonRow | undefined> {
  const [row] = await q<PoisonRow[]>`
    select ${poisonColumns(q)}
    from integration.consumer_raw_poison
    where poison_id = ${poisonId}
    ${forUpdate ? q`for update` : q``}`;
  return row;
}

/**
 * Mark a poison row resolved by the inbox row it became. Fenced on `resolved_at is null`:
 * returns undefined when someone resolved it first.
 */
export async function resolvePoison(
  q: Queryable,
  resolution: { poisonId: string; inboxId: string; resolvedBy: string },
): Promise<PoisonRow | undefined> {
  const [row] = await q<PoisonRow[]>`
    update integration.consumer_raw_poison
    set resolved_at = now(),
        resolved_inbox_id = ${resolution.inboxId},
        resolved_by = ${resolution.resolvedBy}
    where poison_id = ${resolution.poisonId}
      and resolved_at is null
    returning ${poisonColumns(q)}`;
  return row;
}
