/**
 * Sessions of consumers' roles whose transaction runs past the bound, ended
 * (migrations/0201_end_overrunning_sessions.sql; docs/reaper.md, "Sessions past the bound").
 */
import type { Queryable } from '../lib/db';

export interface EndedSession {
  pid: number;
  role_name: string;
  consumer_name: string;
  /** pg_stat_activity's state when it was ended: active, idle in transaction, … */
  state: string | null;
  transaction_seconds: number;
  /** False when the backend could not be signalled (it had already gone). */
  ended: boolean;
}

/** End every session of a consumer's role in this database whose transaction began more than `boundSeconds` ago. */
export async function endOverrunningSessions(q: Queryable, boundSeconds: number): Promise<EndedSession[]> {
  return q<EndedSession[]>`
    select pid, role_name, consumer_name, state, transaction_seconds, ended
    from integration.end_overrunning_sessions(${boundSeconds})
    order by consumer_name, pid`;
}
