/**
 * Hand back rows a worker claimed but never started (its time budget ran out first).
 *
 * No handler ran, so the claim's attempt is refunded and the row returns to the state it
 * was claimed from: RECEIVED when it had never been attempted, otherwise RETRY_PENDING,
 * due now. Fenced on the owner: a row the reaper already took back is left alone.
 */
import type { Queryable } from '../lib/db';
import { planOpaque } from '../lib/plan-opaque';

export async function releaseClaimed(q: Queryable, owner: string, inboxIds: readonly string[]): Promise<string[]> {
  if (inboxIds.length === 0) return [];
  const released = await q<{ inbox_id: string }[]>`
    update integration.consumer_inbox
    set status = case when attempt_count <= 1 then 'RECEIVED' else 'RETRY_PENDING' end,
        attempt_count = greatest(attempt_count - 1, 0),
        next_attempt_at = case when attempt_count <= 1 then null else now() end,
        locked_by = null,
        locked_at = null,
        lease_expires_at = null,
        updated_at = now()
    where inbox_id = any(${inboxIds as string[]}::uuid[])
      and ${planOpaque(q, q`status = 'PROCESSING'`)}
      and locked_by = ${owner}
    returning inbox_id`;
  return released.map((r) => r.inbox_id);
}
