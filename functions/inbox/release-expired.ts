/**
 * Give expired leases back: PROCESSING rows whose lease_expires_at has passed belong to a
 * worker that crashed, timed out or lost its connection. They go back to RETRY_PENDING,
 * due now, with the case inbox design's STALE_PROCESSING_LOCK; a row whose attempt (counted at claim
 * time) was its last goes to QUARANTINED MAX_ATTEMPTS_EXCEEDED instead.
 *
 * Why this cannot steal live work: the lease is the only test (never locked_at plus a
 * guess), a live lease is in the future, and every completion is fenced on locked_by
 * (complete.ts), so a worker that was merely slow finds its row gone and changes nothing.
 * Their lanes, in the same statement: a released row is queued again (the lane trigger
 * marks its lane); one quarantined on its last attempt wakes its lane, or holds it under
 * hold-aggregate (lanes.ts).
 * `for update skip locked`: a row a worker holds locked right now (it is completing it)
 * is skipped, never waited on; if its lease really expired, the next run takes it.
 */
import { ErrorCodes } from '../lib/errors';
import type { Queryable } from '../lib/db';
import { holdLanesOf, wakeLanesOf } from './lanes';
import { planOpaque } from '../lib/plan-opaque';

export interface ReleasedLease {
  inbox_id: string;
  event_id: string;
  status: 'RETRY_PENDING' | 'QUARANTINED';
  attempt_count: number;
  /** The owner whose lease expired. */
  stale_locked_by: string;
}

export async function releaseExpired(
  q: Queryable,
  consumerName: string,
  maxAttempts: number,
  limit: number,
  options: { holdOnQuarantine: boolean } = { holdOnQuarantine: false },
): Promise<ReleasedLease[]> {
  return q<ReleasedLease[]>`
    with released as (
    update integration.consumer_inbox
    set status = case when attempt_count >= ${maxAttempts} then 'QUARANTINED' else 'RETRY_PENDING' end,
        next_attempt_at = case when attempt_count >= ${maxAttempts} then null else now() end,
        quarantined_at = case when attempt_count >= ${maxAttempts} then now() else null end,
        error_code = case when attempt_count >= ${maxAttempts}
                          then ${ErrorCodes.MAX_ATTEMPTS_EXCEEDED} else ${ErrorCodes.STALE_PROCESSING_LOCK} end,
        error_message = case when attempt_count >= ${maxAttempts}
                             then 'gave up after ' || attempt_count || ' attempts; the last one''s processing lease expired'
                             else 'Processing lease expired' end,
        -- SET reads the row as it was: the owner and expiry being cleared below.
        error_detail = jsonb_build_object(
          'staleLockedBy', locked_by,
          'leaseExpiredAt', lease_expires_at,
          'attempt', attempt_count),
        locked_by = null,
        locked_at = null,
        lease_expires_at = null,
        updated_at = now()
    where inbox_id = any(array(
        -- Read from consumer_inbox_in_flight_lane_idx (PROCESSING rows only, a few batches).
        -- The consumer is an opaque filter (plan-opaque.ts): plain, it let the planner, on
        -- statistics taken before a backlog, AND the consumer's dedupe-key entries (every row
        -- it ever stored) with the open-row index (the whole backlog) instead.
        select inbox_id
        from integration.consumer_inbox
        where ${planOpaque(q, q`consumer_name = ${consumerName}`)}
          and status = 'PROCESSING'
          and lease_expires_at < now()
        order by lease_expires_at
        limit ${limit}
        for update skip locked))
      and ${planOpaque(q, q`status = 'PROCESSING'`)}
      and lease_expires_at < now()
    returning inbox_id, event_id, status, attempt_count, consumer_name, aggregate_type, aggregate_id,
              aggregate_version, received_at, offset_no, error_detail ->> 'staleLockedBy' as locked_by_before
    ),
    -- A released row is queued, and the lane trigger marks its lane. A quarantined one lets
    -- the rows behind it go, or, under hold-aggregate, holds them.
    ${options.holdOnQuarantine ? holdLanesOf(q, 'released') : wakeLanesOf(q, 'released')}
    select inbox_id, event_id, status, attempt_count, locked_by_before as stale_locked_by from released`;
}
