/**
 * What a failed attempt means for its row: RETRY_PENDING after its backoff (retry.ts), or
 * QUARANTINED with a code. Shared by the worker and the ingest function's
 * inline mode so that both decide the same way.
 */
import { AggregateVersionGapError, classifyError, ErrorCodes } from '../lib/errors';
import type { Outcome } from '../inbox/types';
import { backoffSeconds } from './retry';
import type { RetryPolicy } from './types';

export interface FailedAttempt {
  inboxId: string;
  /** The attempt that failed, 1-based (the row's attempt_count after its claim). */
  attempt: number;
  /** How long the row has waited since it was received, by the database's clock. */
  waitedSeconds: number;
}

export function outcomeForFailure(policy: RetryPolicy, failed: FailedAttempt, error: unknown, random: () => number = Math.random): Outcome {
  const c = classifyError(error);
  const errorDetail = {
    ...(c.sqlState ? { sqlState: c.sqlState } : {}),
    ...(c.deniedOn ? { deniedOn: c.deniedOn } : {}),
    ...(error instanceof Error && 'detail' in error && typeof error.detail === 'object' && error.detail !== null
      ? (error.detail as Record<string, unknown>)
      : {}),
    attempt: failed.attempt,
  };
  if (error instanceof AggregateVersionGapError) {
    // A gap is held and retried soon, bounded by time rather than by attempts: the wait
    // does not use up the attempt budget, so MAX_ATTEMPTS_EXCEEDED still means "kept
    // failing" and a long-held gap ends as AGGREGATE_VERSION_GAP, which says what happened.
    if (failed.waitedSeconds >= policy.versionGapMaxWaitSeconds) {
      return { inboxId: failed.inboxId, status: 'QUARANTINED', errorCode: c.code, errorMessage: c.message, errorDetail };
    }
    return {
      inboxId: failed.inboxId,
      status: 'RETRY_PENDING',
      delaySeconds: policy.versionGapRetrySeconds,
      refundAttempt: true,
      errorCode: c.code,
      errorMessage: c.message,
      errorDetail,
    };
  }
  if (!c.retryable) {
    return { inboxId: failed.inboxId, status: 'QUARANTINED', errorCode: c.code, errorMessage: c.message, errorDetail };
  }
  if (failed.attempt >= policy.maxAttempts) {
    return {
      inboxId: failed.inboxId,
      status: 'QUARANTINED',
      errorCode: ErrorCodes.MAX_ATTEMPTS_EXCEEDED,
      errorMessage: `gave up after ${failed.attempt} attempts; last error ${c.code}: ${c.message}`,
      errorDetail: { ...errorDetail, lastErrorCode: c.code },
    };
  }
  return {
    inboxId: failed.inboxId,
    status: 'RETRY_PENDING',
    delaySeconds: backoffSeconds(policy, failed.attempt, random),
    errorCode: c.code,
    errorMessage: c.message,
    errorDetail,
  };
}

/**
 * A row claimed with its attempt budget already spent (the reaper returned it after a
 * crash, or an earlier run died mid-batch): quarantined without running its handler again.
 */
export function outcomeForExhausted(policy: RetryPolicy, inboxId: string, attempt: number): Outcome | undefined {
  if (attempt <= policy.maxAttempts) return undefined;
  return {
    inboxId,
    status: 'QUARANTINED',
    errorCode: ErrorCodes.MAX_ATTEMPTS_EXCEEDED,
    errorMessage: `claimed for attempt ${attempt}, over the maximum of ${policy.maxAttempts}`,
    errorDetail: { attempt },
  };
}
