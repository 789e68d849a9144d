/**
 * Errors an operator can act on: a stable code and a message that says what to do. The
 * Lambda returns them as `{ ok: false, error: { code, message } }`; the CLI prints them and
 * exits non-zero (2 for a usage mistake, 1 for everything else).
 */

export const OpsErrorCodes = {
  UNKNOWN_COMMAND: 'UNKNOWN_COMMAND',
  BAD_ARGUMENTS: 'BAD_ARGUMENTS',
  UNKNOWN_CONSUMER: 'UNKNOWN_CONSUMER',
  REASON_REQUIRED: 'REASON_REQUIRED',
  ACTOR_REQUIRED: 'ACTOR_REQUIRED',
  NO_ROWS_MATCH: 'NO_ROWS_MATCH',
  NOT_FOUND: 'NOT_FOUND',
  ALREADY_RESOLVED: 'ALREADY_RESOLVED',
  STILL_INVALID: 'STILL_INVALID',
  NOT_CONFIGURED: 'NOT_CONFIGURED',
  /** An action on AWS and the database where one side failed: the message says what holds. */
  PARTIALLY_APPLIED: 'PARTIALLY_APPLIED',
  /** reingest-failed --apply while the consumer's ingest is paused: nothing was ingested. */
  INGEST_PAUSED: 'INGEST_PAUSED',
  /** A scheduled replay that is unknown, already ran or is not yet due: nothing was replayed. */
  REPLAY_REFUSED: 'REPLAY_REFUSED',
  /** The function URL: a command with no dry run, sent without "apply": true. */
  APPLY_REQUIRED: 'APPLY_REQUIRED',
  /** The ops function invoked directly (no caller identity) with anything but a scheduled replay. */
  FUNCTION_URL_REQUIRED: 'FUNCTION_URL_REQUIRED',
  /** A signed caller of the function URL that is not one of the stage's operators. */
  NOT_AN_OPERATOR: 'NOT_AN_OPERATOR',
} as const;

export type OpsErrorCode = (typeof OpsErrorCodes)[keyof typeof OpsErrorCodes];

/** Codes that mean "the command line (or event) was wrong", as opposed to "the world was not as expected". */
export const USAGE_ERRORS: ReadonlySet<string> = new Set<OpsErrorCode>([
  OpsErrorCodes.UNKNOWN_COMMAND,
  OpsErrorCodes.BAD_ARGUMENTS,
  OpsErrorCodes.UNKNOWN_CONSUMER,
  OpsErrorCodes.REASON_REQUIRED,
  OpsErrorCodes.ACTOR_REQUIRED,
  OpsErrorCodes.APPLY_REQUIRED,
]);

export class OpsError extends Error {
  constructor(
    readonly code: OpsErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'OpsError';
  }

  get isUsageError(): boolean {
    return USAGE_ERRORS.has(this.code);
  }

  toJSON(): { code: OpsErrorCode; message: string; details?: Record<string, unknown> } {
    return { code: this.code, message: this.message, ...(this.details !== undefined ? { details: this.details } : {}) };
  }
}
