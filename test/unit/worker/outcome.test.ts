/** What a failed attempt means for its row (no database involved). */
import { describe, expect, it } from 'vitest';
import { outcomeForExhausted, outcomeForFailure } from '../../../functions/framework/outcome';
import { backoffSeconds } from '../../../functions/framework/retry';
import { DEFAULT_RETRY } from '../../../functions/framework';
import { AggregateVersionGapError, ErrorCodes, RetryableError } from '../../../functions/lib/errors';

const noJitter = () => 0;

describe('backoffSeconds', () => {
  it("follows the case inbox design's schedule, repeating its last entry", () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 9].map((attempt) => backoffSeconds(DEFAULT_RETRY, attempt, noJitter));
    expect(delays).toEqual([5, 5, 30, 120, 600, 1800, 1800, 1800]);
  });

  it('adds jitter below min(60 s, delay)', () => {
    expect(backoffSeconds(DEFAULT_RETRY, 1, () => 0.999)).toBe(5 + 4);
    expect(backoffSeconds(DEFAULT_RETRY, 6, () => 0.999)).toBe(1800 + 59);
  });
});

describe('outcomeForFailure', () => {
  const failed = (attempt: number, waitedSeconds = 0) => ({ inboxId: 'id', attempt, waitedSeconds });

  it('holds a version gap briefly, refunding the attempt', () => {
    const outcome = outcomeForFailure(DEFAULT_RETRY, failed(3), new AggregateVersionGapError(2, 1), noJitter);
    expect(outcome).toMatchObject({
      status: 'RETRY_PENDING',
      errorCode: ErrorCodes.AGGREGATE_VERSION_GAP,
      delaySeconds: DEFAULT_RETRY.versionGapRetrySeconds,
      refundAttempt: true,
    });
  });

  it('quarantines a version gap once the bounded wait has passed, whatever the attempt', () => {
    const outcome = outcomeForFailure(
      DEFAULT_RETRY,
      failed(1, DEFAULT_RETRY.versionGapMaxWaitSeconds),
      new AggregateVersionGapError(2, 1),
      noJitter,
    );
    expect(outcome).toMatchObject({ status: 'QUARANTINED', errorCode: ErrorCodes.AGGREGATE_VERSION_GAP });
  });

  it('does not refund an ordinary retryable failure', () => {
    const outcome = outcomeForFailure(DEFAULT_RETRY, failed(2), new RetryableError('X', 'x'), noJitter);
    expect(outcome).toMatchObject({ status: 'RETRY_PENDING', delaySeconds: 5 });
    expect(outcome).not.toHaveProperty('refundAttempt');
  });
});

describe('outcomeForExhausted', () => {
  it('lets a row within its budget run', () => {
    expect(outcomeForExhausted(DEFAULT_RETRY, 'id', DEFAULT_RETRY.maxAttempts)).toBeUndefined();
  });

  it('quarantines a row claimed beyond its budget', () => {
    expect(outcomeForExhausted(DEFAULT_RETRY, 'id', DEFAULT_RETRY.maxAttempts + 1)).toMatchObject({
      status: 'QUARANTINED',
      errorCode: ErrorCodes.MAX_ATTEMPTS_EXCEEDED,
    });
  });
});
