/**
 * Due rows that no lane points at (claim-due.ts, migration 0050).
 */
import type { Queryable } from '../lib/db';

/**
 * The reaper's safety net: give a lane to every aggregate that has due rows but no lane
 * (the lane triggers make one for every row queued; this finds what a writer with
 * triggers disabled, or a bug, left behind). Reads at most `window` of
 * the oldest RECEIVED rows and of the due RETRY_PENDING rows, through seed 000's
 * consumer_inbox_retry_idx (equality on consumer and status, ordered by its remaining
 * key), and offers each aggregate a lane. Returns the number of lanes created.
 *
 * Which of them already have one is left to ON CONFLICT: its check is a probe of the
 * lanes' primary key for each row, whatever the statistics. Written as NOT EXISTS, it was
 * planned on statistics taken before the backlog ("a few lanes") as a nested loop over all
 * the consumer's lanes for each row: with 10,000 lanes, 200,000 comparisons a run; with a
 * million (a backlog after an outage), a billion. An existing lane is not written.
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
    order by w.aggregate_type, w.aggregate_id
    on conflict (consumer_name, aggregate_type, aggregate_id) do nothing`;
  return result.count;
}
