/**
 * What every session of a function's database role starts with, as settings of the role
 * (ALTER ROLE … SET), never as startup parameters: the startup message carries user,
 * database and application_name only, which RDS Proxy and other poolers accept (docs/design.md,
 * "Connections"). The migration step keeps them on every role a function logs in as
 * (functions/inbox/role-settings.ts); the CDK app reads them to bound each function's client
 * and to check the stage's safety margins against them.
 *
 * A role's settings are its own: PostgreSQL applies those of the role that logs in, not of
 * the groups it belongs to. So each consumer's login role carries them, not inbox_worker.
 */

/** The functions, by the database role they log in as (migrate: the master user, which owns the schema). */
export type SessionKind = 'ingest' | 'worker' | 'relay' | 'reaper' | 'ops' | 'migrate';

export interface SessionTimeouts {
  /** statement_timeout: a statement (lock waits included) is cancelled after this long (SQLSTATE 57014). */
  statementMs: number;
  /** idle_in_transaction_session_timeout: a session left in a transaction (a frozen or killed Lambda) ends, and its locks go. */
  idleInTransactionMs: number;
  /**
   * idle_session_timeout: a session idle this long ends. A retired container's connection
   * frees its backend this soon; longer than the clients' own idle timeout (DB_IDLE_TIMEOUT_SECONDS),
   * so a container invoked every minute keeps its connection.
   */
  idleSessionMs: number;
}

const MINUTE = 60_000;

/**
 * Each kind's timeouts. The worker's, relay's and reaper's statements are bounded by the
 * shortest safety margin their stage may keep before the deadline (cdk/config.ts checks
 * the margins against these); the migration role's statements by the migration function's
 * ten minutes (a file's own SET LOCAL can ask for more inside its transaction).
 */
export const SESSION_TIMEOUTS: Readonly<Record<SessionKind, SessionTimeouts>> = {
  ingest: { statementMs: 30_000, idleInTransactionMs: MINUTE, idleSessionMs: 5 * MINUTE },
  worker: { statementMs: 10_000, idleInTransactionMs: MINUTE, idleSessionMs: 5 * MINUTE },
  relay: { statementMs: 10_000, idleInTransactionMs: MINUTE, idleSessionMs: 5 * MINUTE },
  reaper: { statementMs: 10_000, idleInTransactionMs: MINUTE, idleSessionMs: 5 * MINUTE },
  ops: { statementMs: 30_000, idleInTransactionMs: MINUTE, idleSessionMs: 5 * MINUTE },
  migrate: { statementMs: 5 * MINUTE, idleInTransactionMs: MINUTE, idleSessionMs: 15 * MINUTE },
};

/**
 * How much longer than its statement_timeout the client waits for a statement's answer
 * before it takes the connection for dead: the server's cancellation (57014) comes first.
 */
export const QUERY_GRACE_MS = 2_000;

/** The client-side bound on one statement of `kind` (DB_QUERY_TIMEOUT_MS). */
export function queryBoundMs(kind: SessionKind): number {
  return SESSION_TIMEOUTS[kind].statementMs + QUERY_GRACE_MS;
}

/**
 * The settings a role of `kind` is kept with, as ALTER ROLE … SET takes them. The client
 * encoding is the one postgres.js reads and writes; it would otherwise travel in the
 * startup message.
 */
export function roleSettingsOf(kind: SessionKind): Record<string, string> {
  const t = SESSION_TIMEOUTS[kind];
  return {
    statement_timeout: String(t.statementMs),
    idle_in_transaction_session_timeout: String(t.idleInTransactionMs),
    idle_session_timeout: String(t.idleSessionMs),
    client_encoding: 'UTF8',
  };
}
