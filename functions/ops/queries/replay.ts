/**
 * Operator replay: QUARANTINED → RETRY_PENDING, due now (the case inbox design's statement), audited.
 *
 * Why the attempt count is reset to 0: a row quarantined with MAX_ATTEMPTS_EXCEEDED has
 * used its whole budget, so without a reset the worker would quarantine it again after a
 * single failure. An operator replays after fixing the cause; the row deserves the full
 * backoff schedule. The attempts it had used stay visible in the audit row's prior error
 * codes and in the logs of the earlier attempts.
 *
 * Why ordering is safe: a replayed row re-enters the normal claim path (RETRY_PENDING,
 * due now). The worker serializes the rows of one aggregate and applies versioned events
 * in aggregate_version order, so replaying several rows of one aggregate at once, or a
 * row whose successors were already applied, goes through the same guards as a first
 * delivery (candidates are taken oldest-received first: ./quarantine-action.ts).
 */
import type { Sql, TransactionSql } from '../../lib/db';
import { moveQuarantined, type QuarantineActionRequest, type QuarantineActionResult } from './quarantine-action';

/** What a replay sets (it reads the row as it was). */
export function replaySet(tx: TransactionSql): ReturnType<TransactionSql> {
  return tx`
    status = 'RETRY_PENDING',
    next_attempt_at = now(),
    attempt_count = 0,
    quarantined_at = null,
    error_code = null,
    error_message = null,
    error_detail = null`;
}

export function replayQuarantined(sql: Sql, request: QuarantineActionRequest): Promise<QuarantineActionResult> {
  return moveQuarantined(sql, 'replay', request, replaySet);
}
