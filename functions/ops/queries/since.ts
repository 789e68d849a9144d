/**
 * A time window's start, as an operator gives it: a duration back from the database's
 * now() (`90m`), or an instant (ISO-8601). Postgres owns the clock, so a duration is
 * subtracted in SQL, never from the caller's clock.
 */
import type { Queryable } from '../../lib/db';

export type Since = { seconds: number } | { at: string };

/** The window's start as a timestamptz expression. */
export function sinceBound(q: Queryable, since: Since) {
  return 'seconds' in since ? q`(now() - make_interval(secs => ${since.seconds}))` : q`${since.at}::text::timestamptz`;
}
