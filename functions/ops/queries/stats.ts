/**
 * Operator statistics: per consumer and status, the row counts, the due backlog and its
 * oldest age, and the raw poison depth. Ages are measured by the database's clock.
 *
 * A row is due when it is RECEIVED or RETRY_PENDING and its next attempt time (if any)
 * has passed; its due age is how long it has been waiting since it became due.
 */
import type { Queryable } from '../../lib/db';
import { sameLane } from '../../lib/lane-key';
import { sinceBound, type Since } from './since';
import type { InboxStatus } from '../../inbox/types';

export interface StatusCount {
  consumer_name: string;
  status: InboxStatus;
  count: number;
  /** Rows of this status that are due now (RECEIVED / RETRY_PENDING only). */
  due: number;
  /** Seconds the oldest due row of this status has been due; null when none is due. */
  oldest_due_age_seconds: number | null;
}

export interface PoisonCount {
  consumer_name: string;
  total: number;
  unresolved: number;
  /** Seconds since the oldest unresolved poison row was stored; null when none. */
  oldest_unresolved_age_seconds: number | null;
}

/** Row counts by consumer and status (every status present in the table; zero counts are absent). */
export async function inboxStatusCounts(q: Queryable, consumerName?: string): Promise<StatusCount[]> {
  return q<StatusCount[]>`
    with due as (
      select consumer_name, status,
             (status in ('RECEIVED', 'RETRY_PENDING') and (next_attempt_at is null or next_attempt_at <= now())) as is_due,
             coalesce(next_attempt_at, received_at) as due_since
      from integration.consumer_inbox
      ${consumerName !== undefined ? q`where consumer_name = ${consumerName}` : q``}
    )
    select consumer_name, status,
           count(*)::int as count,
           (count(*) filter (where is_due))::int as due,
           extract(epoch from now() - min(due_since) filter (where is_due))::float8 as oldest_due_age_seconds
    from due
    group by consumer_name, status
    order by consumer_name, status`;
}

/** Raw poison depth by consumer. */
export async function poisonCounts(q: Queryable, consumerName?: string): Promise<PoisonCount[]> {
  return q<PoisonCount[]>`
    select consumer_name,
           count(*)::int as total,
           (count(*) filter (where resolved_at is null))::int as unresolved,
           extract(epoch from now() - min(created_at) filter (where resolved_at is null))::float8
             as oldest_unresolved_age_seconds
    from integration.consumer_raw_poison
    ${consumerName !== undefined ? q`where consumer_name = ${consumerName}` : q``}
    group by consumer_name
    order by consumer_name`;
}

export interface ReceivedCount {
  consumer_name: string;
  event_type: string;
  received: number;
}

/**
 * The case inbox design's last-hour view: rows received per consumer and event type since `since`.
 *
 * The case inbox design writes it as one `where received_at > now() - interval '1 hour'`, which no index
 * of the inbox serves: on a table holding a month of history it reads every row. Rather
 * than another index on every row (write and WAL cost on each event, for an operator's
 * query), each status is read through the partial index it already has, whose timestamp is
 * never earlier than received_at: due rows through a due-row index (the backlog only),
 * in-flight rows through the lease index (a few batches), finished rows by processed_at
 * (or, once purged, payload_purged_at), and quarantined rows by quarantined_at. Each arm still tests received_at, so the count is
 * exact, and the cost follows the rows in the window, not the table. It relies on what the
 * schema and the writers keep true: a finished row has processed_at (a check constraint),
 * and every path to QUARANTINED sets quarantined_at (complete.ts, release-expired.ts).
 *
 * By consumer name (the indexes lead with it): the caller passes the consumers to count.
 *
 * Rows that left the inbox at their payload retention are counted from their kept keys
 * (integration.consumed_events), through the keys' window index: processed_at >= from
 * implies dedupe_until >= from. No row received in a window shorter than `leftAfterDays`
 * (the smallest payload retention of the consumers counted) has left, so such a window
 * leaves that arm out of the statement: the usual last-hour view never reads the keys.
 * A window given as an instant keeps the arm behind a one-time filter, the clock being
 * the database's.
 */
export async function receivedSince(q: Queryable, consumerNames: readonly string[], since: Since, leftAfterDays: number) {
  const names = q`consumer_name = any(${consumerNames as string[]}::text[])`;
  const from = sinceBound(q, since);
  const [counts, [window]] = await Promise.all([
    q<ReceivedCount[]>`
      with recent as (
        select consumer_name, event_type from integration.consumer_inbox
        where ${names} and status in ('RECEIVED', 'RETRY_PENDING') and received_at >= ${from}
        union all
        select consumer_name, event_type from integration.consumer_inbox
        where ${names} and status = 'PROCESSING' and received_at >= ${from}
        union all
        select consumer_name, event_type from integration.consumer_inbox
        where ${names} and status in ('PROCESSED', 'IGNORED') and payload_purged_at is null
          and processed_at >= ${from} and received_at >= ${from}
        union all
        select consumer_name, event_type from integration.consumer_inbox
        where ${names} and status in ('PROCESSED', 'IGNORED') and payload_purged_at >= ${from} and received_at >= ${from}
        union all
        select consumer_name, event_type from integration.consumer_inbox
        where ${names} and status = 'QUARANTINED' and quarantined_at >= ${from} and received_at >= ${from}
        ${
          'seconds' in since && since.seconds <= leftAfterDays * 86_400
            ? q``
            : q`union all
        select consumer_name, event_type from integration.consumed_events
        where ${names} and ${from} < now() - make_interval(days => ${leftAfterDays})
          and dedupe_until >= ${from} and processed_at >= ${from} and received_at >= ${from}`
        }
      )
      select consumer_name, event_type, count(*)::int as received
      from recent
      group by consumer_name, event_type
      order by received desc, consumer_name, event_type`,
    q<{ start: Date }[]>`select ${from} as start`,
  ]);
  return { start: window!.start, counts: [...counts] };
}

/** An aggregate held by one of its QUARANTINED rows (quarantine policy hold-aggregate). */
export interface HeldAggregate {
  consumer_name: string;
  aggregate_type: string;
  aggregate_id: string;
  /** The QUARANTINED row that holds it. */
  inbox_id: string;
  event_id: string;
  error_code: string | null;
  quarantined_at: Date | null;
  /** Rows queued behind it. */
  behind: number;
}

/**
 * The held aggregates, longest held first, at most `limit`: the held lanes
 * (consumer_lane_held_by_idx), the row each names, and the rows queued behind it.
 */
export async function heldAggregates(q: Queryable, consumerName: string | undefined, limit: number): Promise<HeldAggregate[]> {
  return q<HeldAggregate[]>`
    select l.consumer_name, l.aggregate_type, l.aggregate_id, h.inbox_id, h.event_id, h.error_code, h.quarantined_at,
           b.behind::int as behind
    from integration.consumer_lane l
    join integration.consumer_inbox h on h.inbox_id = l.held_by
    cross join lateral (
      select count(*) as behind
      from integration.consumer_inbox d
      where ${sameLane(q, 'd', 'l')}
        and d.status in ('RECEIVED', 'RETRY_PENDING')
    ) b
    where l.held_by is not null
      ${consumerName !== undefined ? q`and l.consumer_name = ${consumerName}` : q``}
    order by h.quarantined_at nulls last, l.consumer_name, l.aggregate_type, l.aggregate_id
    limit ${limit}`;
}
