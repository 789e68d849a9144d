/**
 * The backlog gauges of every consumer, in one statement. Each figure is read through a
 * partial index whose size follows the backlog, not the table's history:
 *   due depth, oldest due age  consumer_inbox_retry_idx (RECEIVED / RETRY_PENDING only)
 *   quarantine depth           consumer_inbox_quarantine_idx (QUARANTINED only)
 *   held depth                 the held lanes (consumer_lane_held_by_idx), and their queued
 *                              rows through consumer_inbox_open_lane_idx
 *   poison in the last hour    consumer_raw_poison_created_idx (consumer_name, created_at)
 *   paused                     consumer_pause's primary key
 * test/db/reaper/gauges.test.ts checks the plans with EXPLAIN.
 */
import type { Queryable } from '../lib/db';
import { sameLane } from '../lib/lane-key';
import { processingPaused } from './consumer-pause';

export interface ConsumerGauges {
  consumer_name: string;
  /** RECEIVED and RETRY_PENDING rows due now. */
  due_depth: number;
  /** Seconds since the oldest due row was received (0 when nothing is due). */
  oldest_due_age_seconds: number;
  quarantine_depth: number;
  /** Aggregates held by a QUARANTINED row (quarantine policy hold-aggregate). */
  held_aggregates: number;
  /** Rows queued behind those rows, unclaimed until an operator replays or resolves them. */
  held_depth: number;
  /** Raw poison rows recorded in the last hour. */
  poison_last_hour: number;
  /** The consumer's processing is paused (ops pause). */
  paused: boolean;
}

export async function readGauges(q: Queryable, consumerNames: readonly string[]): Promise<ConsumerGauges[]> {
  if (consumerNames.length === 0) return [];
  return q<ConsumerGauges[]>`
    select c.consumer_name,
           due.depth::int as due_depth,
           coalesce(extract(epoch from now() - due.oldest_received_at), 0)::float8 as oldest_due_age_seconds,
           quarantined.depth::int as quarantine_depth,
           held.aggregates::int as held_aggregates,
           held.depth::int as held_depth,
           poison.depth::int as poison_last_hour,
           ${processingPaused(q, q`c.consumer_name`)} as paused
    from unnest(${consumerNames as string[]}::text[]) as c(consumer_name)
    cross join lateral (
      select count(*) as depth, min(i.received_at) as oldest_received_at
      from integration.consumer_inbox i
      where i.consumer_name = c.consumer_name
        and i.status in ('RECEIVED', 'RETRY_PENDING')
        and (i.next_attempt_at is null or i.next_attempt_at <= now())
    ) due
    cross join lateral (
      select count(*) as depth
      from integration.consumer_inbox i
      where i.consumer_name = c.consumer_name
        and i.status = 'QUARANTINED'
    ) quarantined
    cross join lateral (
      select count(*) as aggregates, coalesce(sum(b.n), 0) as depth
      from integration.consumer_lane l
      cross join lateral (
        select count(*) as n
        from integration.consumer_inbox d
        where ${sameLane(q, 'd', 'l')}
          and d.status in ('RECEIVED', 'RETRY_PENDING')
      ) b
      where l.held_by is not null
        and l.consumer_name = c.consumer_name
    ) held
    cross join lateral (
      select count(*) as depth
      from integration.consumer_raw_poison p
      where p.consumer_name = c.consumer_name
        and p.created_at > now() - interval '1 hour'
    ) poison
    order by c.consumer_name`;
}
