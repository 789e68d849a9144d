/**
 * A condition the planner cannot use to pick an index: `(case when <cond> then true else
 * false end)` proves no partial index's predicate.
 *
 * For statements that find their rows by primary key (`inbox_id = any(…)`) and then check
 * their state. Written plainly, `status = 'PROCESSING'` lets the planner join the key
 * lookups with a partial index on that status in a bitmap AND, or read that index instead:
 * and an index on a status the inbox moves every row through holds every version since the
 * last VACUUM (a bitmap scan skips none of the dead ones), so each batch would read all the
 * rows claimed since then. Opaque, the check is a filter on the rows the keys found.
 */
import type postgres from 'postgres';
import type { Queryable } from './db';

export function planOpaque(q: Queryable, condition: postgres.PendingQuery<postgres.Row[]> | postgres.Fragment) {
  return q`(case when ${condition} then true else false end)`;
}
