/**
 * One event's story, for `ops event`: the case inbox design's findByConsumerAndEventId (or the rows
 * stored from one Kafka offset), with where the row stands in its aggregate and the
 * poison rows of the same record; once the row has left the inbox, what its kept key says.
 *
 * Both lookups stay index probes on a table holding a month of history: by event id
 * through the unique key (consumer_name, event_id), once per consumer asked about — the
 * caller passes the declared consumers when none is named, never "any consumer", which
 * the key cannot serve —, by offset through consumer_inbox_topic_offset_idx, the aggregate
 * through consumer_inbox_aggregate_idx, and poison through its unique offset key and the
 * partial index on resolved_inbox_id (0071).
 */
import type { Queryable } from '../../lib/db';
import type { InboxRow, InboxStatus } from '../../inbox/types';

/**
 * The inbox id of a consumer's event, if the inbox holds it or held it and its key is kept
 * (integration.consumed_events keeps the id the row had).
 */
export async function inboxIdOf(q: Queryable, consumerName: string, eventId: string): Promise<string | undefined> {
  const [row] = await q<{ inbox_id: string }[]>`
    select inbox_id from integration.consumer_inbox
    where consumer_name = ${consumerName} and event_id = ${eventId}
    union all
    select inbox_id from integration.consumed_events
    where consumer_name = ${consumerName} and event_id = ${eventId}
    limit 1`;
  return row?.inbox_id;
}

/** What is kept of a row that left the inbox at its payload retention (migration 0110). */
export interface ConsumedEventRow {
  consumer_name: string;
  event_id: string;
  inbox_id: string;
  event_type: string;
  status: 'PROCESSED' | 'IGNORED';
  topic_name: string;
  partition_no: number;
  offset_no: number;
  received_at: Date;
  processed_at: Date;
  quarantined_at: Date | null;
  error_code: string | null;
  /** Until then a redelivery of the event is a duplicate. */
  dedupe_until: Date;
}

/**
 * The kept keys of a consumer's event, by event id: one primary-key probe per consumer
 * asked about. By offset the table has no index (each key would carry one more entry for
 * an operator's rare question), so rows that left are found by event id only.
 */
export async function findConsumedEvents(q: Queryable, consumerNames: readonly string[], eventId: string): Promise<ConsumedEventRow[]> {
  return q<ConsumedEventRow[]>`
    select consumer_name, event_id, inbox_id, event_type, status, topic_name, partition_no, offset_no,
           received_at, processed_at, quarantined_at, error_code, dedupe_until
    from integration.consumed_events
    where consumer_name = any(${consumerNames as string[]}::text[]) and event_id = ${eventId}
    order by consumer_name`;
}

export type EventLookup =
  | { consumerNames: readonly string[]; eventId: string }
  | { consumerNames?: readonly string[] | undefined; topic: string; partition: number; offset: number };

export interface EventRow extends Omit<InboxRow, 'payload' | 'headers'> {
  record_key: string | null;
  record_key_encoding: 'utf8' | 'base64';
  partition_key: string | null;
  /** By the database's clock; null when the row holds no lease. */
  lease_expired: boolean | null;
  processed_at: Date | null;
  quarantined_at: Date | null;
  payload_purged_at: Date | null;
  updated_at: Date;
  error_message: string | null;
  error_detail: unknown;
  /** The aggregate's head: its first open row (RECEIVED, RETRY_PENDING, PROCESSING) in the claim's order. */
  head_inbox_id: string | null;
  head_event_id: string | null;
  head_status: InboxStatus | null;
  head_aggregate_version: number | null;
  /** Open rows of the aggregate before this row in the claim's order, and after it. */
  open_ahead: number;
  open_behind: number;
  /** Other rows of the aggregate that are QUARANTINED. */
  quarantined_in_aggregate: number;
  /** Only when asked for. */
  payload?: unknown;
  headers?: unknown;
}

/**
 * A row's place in its aggregate's order, the claim's head order (claim-due.ts:
 * aggregate_version nulls last, then arrival, then offset) as one comparable value.
 */
function orderKey(q: Queryable, alias: 'i' | 'o') {
  const t = q(alias);
  return q`(${t}.aggregate_version is null, coalesce(${t}.aggregate_version, 0), ${t}.received_at, ${t}.offset_no)`;
}

export async function findEventRows(q: Queryable, lookup: EventLookup, includePayload: boolean): Promise<EventRow[]> {
  const where =
    'eventId' in lookup
      ? q`i.consumer_name = any(${lookup.consumerNames as string[]}::text[]) and i.event_id = ${lookup.eventId}`
      : q`i.topic_name = ${lookup.topic} and i.partition_no = ${lookup.partition} and i.offset_no = ${lookup.offset}
          ${lookup.consumerNames !== undefined ? q`and i.consumer_name = any(${lookup.consumerNames as string[]}::text[])` : q``}`;
  const open = q`('RECEIVED', 'RETRY_PENDING', 'PROCESSING')`;
  return q<EventRow[]>`
    select i.inbox_id, i.consumer_name, i.event_id, i.event_type, i.event_version, i.aggregate_type, i.aggregate_id,
           i.aggregate_version, i.topic_name, i.partition_no, i.offset_no, i.record_key, i.record_key_encoding,
           i.partition_key, i.correlation_id, i.causation_id, i.producer, i.tenant_id, i.occurred_at, i.received_at,
           i.status, i.attempt_count, i.next_attempt_at, i.locked_by, i.locked_at, i.lease_expires_at,
           case when i.lease_expires_at is null then null else i.lease_expires_at < now() end as lease_expired,
           i.processed_at, i.quarantined_at, i.payload_purged_at, i.updated_at,
           i.error_code, i.error_message, i.error_detail, i.trace_context,
           ${includePayload ? q`i.payload, i.headers,` : q``}
           h.inbox_id as head_inbox_id, h.event_id as head_event_id, h.status as head_status,
           h.aggregate_version as head_aggregate_version,
           p.open_ahead, p.open_behind, p.quarantined_in_aggregate
    from integration.consumer_inbox i
    left join lateral (
      select o.inbox_id, o.event_id, o.status, o.aggregate_version
      from integration.consumer_inbox o
      where o.consumer_name = i.consumer_name
        and o.aggregate_type = i.aggregate_type
        and o.aggregate_id = i.aggregate_id
        and o.status in ${open}
      order by ${orderKey(q, 'o')}
      limit 1
    ) h on true
    cross join lateral (
      select (count(*) filter (where o.status in ${open} and ${orderKey(q, 'o')} < ${orderKey(q, 'i')}))::int as open_ahead,
             (count(*) filter (where o.status in ${open} and ${orderKey(q, 'o')} > ${orderKey(q, 'i')}))::int as open_behind,
             (count(*) filter (where o.status = 'QUARANTINED'))::int as quarantined_in_aggregate
      from integration.consumer_inbox o
      where o.consumer_name = i.consumer_name
        and o.aggregate_type = i.aggregate_type
        and o.aggregate_id = i.aggregate_id
        and o.inbox_id <> i.inbox_id
    ) p
    where ${where}
    order by i.consumer_name`;
}

export interface EventPoisonRow {
  poison_id: string;
  consumer_name: string;
  topic_name: string;
  partition_no: number;
  offset_no: number;
  error_code: string | null;
  error_message: string;
  created_at: Date;
  resolved_at: Date | null;
  resolved_inbox_id: string | null;
  resolved_by: string | null;
}

/**
 * Poison rows of a record: those stored for one of these (consumer, offset) positions, and
 * those re-ingested into one of these inbox rows. Without the raw value (`poison show`).
 */
export async function findEventPoison(
  q: Queryable,
  positions: readonly { consumerName: string; topic: string; partition: number; offset: number }[],
  inboxIds: readonly string[],
): Promise<EventPoisonRow[]> {
  if (positions.length === 0 && inboxIds.length === 0) return [];
  const columns = q`p.poison_id, p.consumer_name, p.topic_name, p.partition_no, p.offset_no, p.error_code, p.error_message,
    p.created_at, p.resolved_at, p.resolved_inbox_id, p.resolved_by`;
  // A union, not one OR: each half is an index probe, an OR of the two a scan.
  return q<EventPoisonRow[]>`
    select ${columns}
    from unnest(${positions.map((x) => x.consumerName)}::text[], ${positions.map((x) => x.topic)}::text[],
                ${positions.map((x) => x.partition)}::int[], ${positions.map((x) => x.offset)}::bigint[])
           as at (consumer_name, topic_name, partition_no, offset_no)
    join integration.consumer_raw_poison p
      on p.consumer_name = at.consumer_name and p.topic_name = at.topic_name
     and p.partition_no = at.partition_no and p.offset_no = at.offset_no
    union
    select ${columns}
    from integration.consumer_raw_poison p
    where p.resolved_inbox_id = any(${inboxIds as string[]}::uuid[])
    order by consumer_name, created_at`;
}
