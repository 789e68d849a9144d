/**
 * Due rows that no lane points at (claim-due.ts, migration 0050).
 */
import type { Queryable } from '../lib/db';

/**
 * The reaper's safety net: give a lane to every aggregate that has due rows but no lane
 * (the lane triggers make one for every row queued; this finds what a writer with
 * triggers disabled, or a bug, left behind). Reads at most `window` of
 * the oldest RECEIVED rows and of the due RETRY_PENDING rows, through the case inbox design's
 * consumer_inbox_retry_idx (equality on consumer and status, ordered by its remaining
 * key), and gives a lane to those of their aggregates that the statement's snapshot sees
 * without one. Returns the number of lanes created.
 *
 * Which have one is a probe of the lanes' primary key per row: a LATERAL lookup with LIMIT
 * 1 on the whole key, which the planner cannot turn into a join. Written as NOT EXISTS, it
 * was planned on statistics taken before the backlog ("a few lanes") as a nested loop over
 * all the consumer's lanes for each row: with 10,000 lanes, 200,000 comparisons a run;
 * with a million (a backlog after an outage), a billion. The lookup reads the snapshot and
 * never waits: left to ON CONFLICT alone, the insert would wait for every transaction
 * writing one of those lanes (a claim deleting it, a worker waking it) and then add a lane
 * to an aggregate that a claim had just taken. ON CONFLICT stays for a lane created since
 * the snapshot.
 */
export async function adoptOrphans(q: Queryable, consumerName: string, window: number): Promise<number> {
  const result = await q`
    insert into integration.consumer_lane as l (consumer_name, aggregate_type, aggregate_id, due_at)
    select ${consumerName}::text, w.aggregate_type, w.aggregate_id, now()
    from (
      (select a.aggregate_type, a.aggregate_id
       from integration.consumer_inbox a
       where a.consumer_name = ${consumerName} and a.status = 'RECEIVED'
       order by a.next_attempt_at, a.received_at
       limit ${window})
      union
      (select a.aggregate_type, a.aggregate_id
       from integration.consumer_inbox a
       where a.consumer_name = ${consumerName} and a.status = 'RETRY_PENDING' and a.next_attempt_at <= now()
       order by a.next_attempt_at, a.received_at
       limit ${window})
    ) w
    left join lateral (
      select 1 as found
      from integration.consumer_lane x
      where x.consumer_name = ${consumerName} and x.aggregate_type = w.aggregate_type and x.aggregate_id = w.aggregate_id
      limit 1
    ) x on true
    where x.found is null
    order by w.aggregate_type, w.aggregate_id
    on conflict (consumer_name, aggregate_type, aggregate_id) do nothing`;
  return result.count;
}
