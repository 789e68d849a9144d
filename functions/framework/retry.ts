/**
 * The retry policy of a consumer's rows: its defaults (the case inbox design's schedule) and
 * the backoff a failed attempt waits before the next.
 */
import { scheduledDelaySeconds } from '../lib/backoff';
import type { RetryPolicy } from './types';

/** The case inbox design's retry schedule: 5 s, 5 s, 30 s, 2 min, 10 min, then 30 min, 10 attempts. */
export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 10,
  backoffSeconds: [5, 5, 30, 120, 600, 1800],
  maxJitterSeconds: 60,
  versionGapRetrySeconds: 2,
  versionGapMaxWaitSeconds: 15 * 60,
};

/** Seconds to wait after failed attempt `attempt` (1-based): the schedule, then its last entry, plus jitter. */
export function backoffSeconds(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const base = scheduledDelaySeconds(policy.backoffSeconds, attempt, 0);
  const jitter = Math.floor(random() * Math.min(policy.maxJitterSeconds, base));
  return base + jitter;
}
