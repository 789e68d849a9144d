/**
 * The small error hierarchy that decides outcomes.
 *
 * A handler (or the platform) throws a RetryableError when trying again later can succeed
 * and a NonRetryableError when it cannot. Everything else is classified here: PostgreSQL
 * errors by SQLSTATE (never by message text), postgres.js / socket errors by their `code`,
 * and anything unknown as retryable — the attempt limit bounds it and ends in quarantine.
 */

export abstract class InboxError extends Error {
  abstract readonly retryable: boolean;
  readonly code: string;
  readonly detail: Record<string, unknown> | undefined;

  constructor(code: string, message: string, options: { cause?: unknown; detail?: Record<string, unknown> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.detail = options.detail;
  }
}

/** Trying again later may succeed: the row goes to RETRY_PENDING with backoff. */
export class RetryableError extends InboxError {
  readonly retryable = true;
}

/** Trying again cannot succeed: the row goes to QUARANTINED with this code. */
export class NonRetryableError extends InboxError {
  readonly retryable = false;
}

/** Stable outcome codes used across functions, tests and the ops tooling. */
export const ErrorCodes = {
  UNSUPPORTED_EVENT_TYPE: 'UNSUPPORTED_EVENT_TYPE',
  UNSUPPORTED_EVENT_VERSION: 'UNSUPPORTED_EVENT_VERSION',
  PAYLOAD_INVALID: 'PAYLOAD_INVALID',
  MAX_ATTEMPTS_EXCEEDED: 'MAX_ATTEMPTS_EXCEEDED',
  AGGREGATE_VERSION_GAP: 'AGGREGATE_VERSION_GAP',
  STALE_PROCESSING_LOCK: 'STALE_PROCESSING_LOCK',
  DB_TRANSIENT: 'DB_TRANSIENT',
  DB_CONNECTION: 'DB_CONNECTION',
  DB_DATA_EXCEPTION: 'DB_DATA_EXCEPTION',
  DB_INTEGRITY_VIOLATION: 'DB_INTEGRITY_VIOLATION',
  /** A value beyond a PostgreSQL limit (SQLSTATE class 54): an index entry too long, say. */
  DB_LIMIT_EXCEEDED: 'DB_LIMIT_EXCEEDED',
  /**
   * SQLSTATE 42501: the consumer's role lacks a grant (a table, or a column, missing from its
   * declaration's `tables`). Quarantined, not retried: no attempt can succeed until a deploy
   * grants it; the row keeps everything and `ops replay --code DB_PERMISSION` runs it again.
   */
  DB_PERMISSION: 'DB_PERMISSION',
  DB_ERROR: 'DB_ERROR',
  UNEXPECTED_ERROR: 'UNEXPECTED_ERROR',
  /** Not an error: an operator resolved a QUARANTINED row without running it (ops resolve). */
  OPERATOR_RESOLVED: 'OPERATOR_RESOLVED',
  /** A handler emitted an event type its declaration does not list in `emits`. */
  OUTBOX_EVENT_UNDECLARED: 'OUTBOX_EVENT_UNDECLARED',
  /** A handler audited, but its declaration has no `audit` trail. */
  AUDIT_NOT_DECLARED: 'AUDIT_NOT_DECLARED',
} as const;

/** SQLSTATEs that are worth retrying as they are (the same statement can succeed later). */
const TRANSIENT_SQLSTATES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available
  '57014', // query_canceled (statement_timeout, cancel request)
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '25006', // read_only_sql_transaction (failover: writer became reader)
  '40003', // statement_completion_unknown
]);

/** SQLSTATE classes that are transient as a whole. */
const TRANSIENT_SQLSTATE_CLASSES = new Set([
  '08', // connection exception
  '53', // insufficient resources (too many connections, out of memory, disk full)
  '58', // system error (I/O)
]);

/** SQLSTATE classes that will fail the same way every time for the same data. */
const NON_RETRYABLE_SQLSTATE_CLASSES: Record<string, string> = {
  '22': ErrorCodes.DB_DATA_EXCEPTION,
  '23': ErrorCodes.DB_INTEGRITY_VIOLATION,
  // program_limit_exceeded (54000: an index row over the B-tree's maximum), too many columns
  // or arguments: the same statement on the same values fails again.
  '54': ErrorCodes.DB_LIMIT_EXCEEDED,
};

/**
 * Operator intervention (class 57) that ends the session: the connection is gone even
 * though the error came from the server, so it is a connection loss, not a row's failure.
 */
const CONNECTION_TERMINATING_SQLSTATES = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, server shutdown)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, failing over)
  '57P05', // idle_session_timeout
]);

/** Error codes set by postgres.js and Node's sockets when the connection itself fails. */
const CONNECTION_ERROR_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

export interface Classification {
  retryable: boolean;
  code: string;
  /** SQLSTATE when the error came from PostgreSQL. */
  sqlState?: string;
  /** DB_PERMISSION: what the role may not use, as PostgreSQL names it (`table sla_obligation`). */
  deniedOn?: string;
  /** A short message safe to store and log: never a payload or a query parameter. */
  message: string;
}

/** The SQLSTATE of a PostgreSQL error raised through postgres.js, if this is one. */
export function sqlStateOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const e = error as { name?: unknown; code?: unknown };
  if (e.name === 'PostgresError' && typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
  return undefined;
}

/** True when the error says the database could not be reached or the connection broke. */
export function isConnectionError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_ERROR_CODES.has(code)) return true;
  const state = sqlStateOf(error);
  return state !== undefined && (state.startsWith('08') || CONNECTION_TERMINATING_SQLSTATES.has(state));
}

/**
 * True for failures of the infrastructure rather than of the data: the database is away,
 * overloaded, timed out or failing over. The ingest function reports these back to the
 * event-source mapping; everything else is a property of the record.
 */
export function isInfrastructureError(error: unknown): boolean {
  if (isConnectionError(error)) return true;
  const state = sqlStateOf(error);
  if (state === undefined) return false;
  return TRANSIENT_SQLSTATES.has(state) || TRANSIENT_SQLSTATE_CLASSES.has(state.slice(0, 2));
}

/** insufficient_privilege: a statement on something the role was not granted. */
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * What a 42501 was refused on, from PostgreSQL's message ("permission denied for table
 * sla_obligation", "… for schema case_core", "… for sequence …"): an object's kind and name,
 * never a value. Undefined when the message has another form.
 */
export function deniedObjectOf(error: unknown): string | undefined {
  const message = error instanceof Error ? error.message : '';
  const match = /^permission denied for (table|schema|sequence|function|view|relation) ([\w."$-]{1,200})$/.exec(message);
  return match === null ? undefined : `${match[1]} ${match[2]}`;
}

function messageOf(error: unknown): string {
  const raw = error instanceof Error ? error.message : String(error);
  // Bound what is stored and logged. Not a redaction: PostgreSQL quotes the value it could
  // not read in some messages (22P02 invalid_text_representation, 22003 out of range), so log
  // lines carry the code and SQLSTATE, and a message only where no payload can reach it.
  return raw.length > 500 ? `${raw.slice(0, 500)}…` : raw;
}

/** Decide what an error means for the row being processed. */
export function classifyError(error: unknown): Classification {
  if (error instanceof InboxError) {
    return { retryable: error.retryable, code: error.code, message: messageOf(error) };
  }
  if (isConnectionError(error)) {
    const sqlState = sqlStateOf(error);
    return { retryable: true, code: ErrorCodes.DB_CONNECTION, message: messageOf(error), ...(sqlState ? { sqlState } : {}) };
  }
  const sqlState = sqlStateOf(error);
  if (sqlState !== undefined) {
    const cls = sqlState.slice(0, 2);
    if (TRANSIENT_SQLSTATES.has(sqlState) || TRANSIENT_SQLSTATE_CLASSES.has(cls)) {
      return { retryable: true, code: ErrorCodes.DB_TRANSIENT, sqlState, message: messageOf(error) };
    }
    if (sqlState === INSUFFICIENT_PRIVILEGE) {
      const deniedOn = deniedObjectOf(error);
      return { retryable: false, code: ErrorCodes.DB_PERMISSION, sqlState, message: messageOf(error), ...(deniedOn ? { deniedOn } : {}) };
    }
    const nonRetryable = NON_RETRYABLE_SQLSTATE_CLASSES[cls];
    if (nonRetryable !== undefined) {
      return { retryable: false, code: nonRetryable, sqlState, message: messageOf(error) };
    }
    return { retryable: true, code: ErrorCodes.DB_ERROR, sqlState, message: messageOf(error) };
  }
  return { retryable: true, code: ErrorCodes.UNEXPECTED_ERROR, message: messageOf(error) };
}

/**
 * What a log line may say of an error: the message of a client-side error (a refused
 * connection, a timeout), never a PostgreSQL server's, which can quote the values of the
 * statement (a data error's "invalid input syntax for type json: …"). SQLSTATE and code say
 * what happened without them.
 */
export function serverSafe(c: { message: string; sqlState?: string | undefined }): { error?: string } {
  return c.sqlState === undefined ? { error: c.message } : {};
}

/**
 * A versioned event arrived before its predecessor was applied. Held and retried soon
 * (not with the usual backoff) until the consumer's bounded wait expires; then the
 * worker quarantines the row with AGGREGATE_VERSION_GAP.
 */
export class AggregateVersionGapError extends RetryableError {
  constructor(
    readonly expectedPrevious: number,
    readonly actualLast: number | null,
  ) {
    super(
      ErrorCodes.AGGREGATE_VERSION_GAP,
      `aggregate version gap: needs last applied version ${expectedPrevious}, found ${actualLast ?? 'none'}`,
      { detail: { expectedPrevious, actualLast } },
    );
  }
}
