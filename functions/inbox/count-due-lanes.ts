/**
 * The consumer's backlog as a worker deciding to fan out sees it: its due lanes (aggregates
 * whose head a claim could take now), counted up to `cap`.
 *
 * An ordered range of consumer_lane_due_idx (migration 0051), stopped after `cap` entries:
 * the cost is bounded by the cap, whatever the backlog and whatever the statistics say.
 * Lanes, not rows: a claim takes up to one run per lane, and lanes are what several
 * workers can take in parallel (one aggregate is never processed by two).
 */
import type { Queryable } from '../lib/db';

export async function countDueLanes(q: Queryable, consumerName: string, cap: number): Promise<number> {
  const [row] = await q<{ n: number }[]>`
    select count(*)::int as n
    from (
      select 1
      from integration.consumer_lane l
      where l.consumer_name = ${consumerName}
        and l.due_at <= now() and l.locked_by is null and l.held_by is null
      limit ${Math.max(1, Math.floor(cap))}
    ) d`;
  return row!.n;
}
