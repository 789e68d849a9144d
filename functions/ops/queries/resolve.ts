/**
 * Operator resolve: QUARANTINED → IGNORED without running the handler, audited. For an
 * event that must not be applied (a producer's mistake, a duplicate under another id, a
 * gap the business accepts): the row is finished like any IGNORED row, so it leaves the
 * inbox at its payload retention, and its dedupe key keeps a redelivery from coming back
 * until the dedupe window ends.
 *
 * The row keeps quarantined_at (when it was quarantined) and says in error_detail what it
 * was quarantined for, who resolved it and why; error_code OPERATOR_RESOLVED marks it.
 */
import type { Sql } from '../../lib/db';
import { ErrorCodes } from '../../lib/errors';
import { moveQuarantined, type QuarantineActionRequest, type QuarantineActionResult } from './quarantine-action';

export function resolveQuarantined(sql: Sql, request: QuarantineActionRequest): Promise<QuarantineActionResult> {
  return moveQuarantined(
    sql,
    'resolve',
    request,
    (tx) => tx`
      status = 'IGNORED',
      processed_at = now(),
      next_attempt_at = null,
      error_code = ${ErrorCodes.OPERATOR_RESOLVED},
      error_message = ${`resolved by ${request.actor}: ${request.reason}`},
      -- SET reads the row as it was: the quarantine's own error is kept here.
      error_detail = jsonb_build_object(
        'resolvedBy', ${request.actor}::text,
        'reason', ${request.reason}::text,
        'quarantineErrorCode', i.error_code,
        'quarantineErrorMessage', i.error_message,
        'quarantineErrorDetail', i.error_detail)`,
  );
}
