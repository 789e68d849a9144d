/**
 * Record the outcomes of a batch of rows, in one statement, fenced on the lease owner.
 *
 * Only rows still PROCESSING under `owner` change: a worker whose lease expired and was
 * taken over by another changes nothing, and sees it in the returned ids (a lost lease
 * shows, as in graphile-worker's completeJobs). Postgres owns the clock: retry times are
 * `now() + delay`.
 *
 * A finished row (PROCESSED, IGNORED) keeps lease_expires_at and updated_at as its claim
 * set them: the lease it finished under and the time it was claimed; processed_at says when
 * it finished. Both columns follow the payload in the row, so leaving them unchanged lets
 * PostgreSQL log the new row version without the payload when it stays on its page
 * (migration 0111). Nothing reads a finished row's lease: every lease test is on
 * PROCESSING rows. A row going back to the queue or to quarantine clears its lease.
 */
import type { Queryable } from '../lib/db';
import { planOpaque } from '../lib/plan-opaque';
import type { Outcome } from './types';

export async function completeRows(q: Queryable, owner: string, outcomes: readonly Outcome[]): Promise<string[]> {
  if (outcomes.length === 0) return [];
  const rows = outcomes.map((o) => ({
    inbox_id: o.inboxId,
    status: o.status,
    delay_seconds: o.status === 'RETRY_PENDING' ? o.delaySeconds : null,
    refund_attempt: o.status === 'RETRY_PENDING' && o.refundAttempt === true,
    error_code: o.status === 'RETRY_PENDING' || o.status === 'QUARANTINED' ? o.errorCode : null,
    error_message: o.status === 'RETRY_PENDING' || o.status === 'QUARANTINED' ? o.errorMessage : null,
    error_detail:
      (o.status === 'RETRY_PENDING' || o.status === 'QUARANTINED') && o.errorDetail !== undefined ? JSON.stringify(o.errorDetail) : null,
  }));
  const changed = await q<{ inbox_id: string }[]>`
    update integration.consumer_inbox i
    set status = o.status,
        attempt_count = case when o.refund_attempt then greatest(i.attempt_count - 1, 0) else i.attempt_count end,
        processed_at = case when o.status in ('PROCESSED', 'IGNORED') then now() else i.processed_at end,
        quarantined_at = case when o.status = 'QUARANTINED' then now() else null end,
        next_attempt_at = case when o.status = 'RETRY_PENDING' then now() + make_interval(secs => o.delay_seconds) else null end,
        error_code = o.error_code,
        error_message = o.error_message,
        error_detail = o.error_detail::jsonb,
        locked_by = null,
        locked_at = null,
        lease_expires_at = case when o.status in ('PROCESSED', 'IGNORED') then i.lease_expires_at end,
        updated_at = case when o.status in ('PROCESSED', 'IGNORED') then i.updated_at else now() end
    from json_to_recordset(${JSON.stringify(rows)}::text::json) as o(
      inbox_id uuid, status text, delay_seconds float8, refund_attempt boolean, error_code text, error_message text, error_detail text)
    where i.inbox_id = o.inbox_id
      and ${planOpaque(q, q`i.status = 'PROCESSING'`)}
      and i.locked_by = ${owner}
    returning i.inbox_id`;
  return changed.map((r) => r.inbox_id);
}
