/**
 * The consumer's backlog as a worker deciding to fan out sees it: its due lanes (aggregates
 * whose head a claim could take now), counted up to `cap`.
 *
 * An ordered range of consumer_lane_due_idx (migration 0050), stopped after `cap` entries:
 * the cost is bounded by the cap, whatever the backlog and whatever the statistics say.
 * Lanes, not rows: a claim takes up to one run per lane, and lanes are what several
 * workers can take in parallel (one aggregate is never processed by two).
 */
import type { Queryable } from '../../lib/db';
import { ownConsumer } from '../../lib/own-consumer';

/**
 * The consumer's lanes a claim could take now, as a subquery: what the claim's own first
 * step selects (claim-due.ts), in consumer_lane_due_idx's order. The one place outside the
 * claim that says what a due lane is (worker-slot.ts asks it too).
 */
export function dueLanes(q: Queryable, consumerName: string) {
  return q`
    select 1
    from integration.consumer_lane l
    where l.consumer_name = ${ownConsumer(q, consumerName)}
      and l.due_at <= now() and l.held_by is null
    order by l.due_at`;
}

export async function countDueLanes(q: Queryable, consumerName: string, cap: number): Promise<number> {
  const [row] = await countDueLanesStatement(q, consumerName, cap);
  return row!.n;
}

/** The count's statement, not yet sent (tests EXPLAIN it). */
export function countDueLanesStatement(q: Queryable, consumerName: string, cap: number) {
  return q<{ n: number }[]>`
    select count(*)::int as n
    from (${dueLanes(q, consumerName)} limit ${Math.max(1, Math.floor(cap))}) d`;
}
