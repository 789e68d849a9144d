/**
 * The fence at the start of a worker's batch transaction: lock, FOR UPDATE, the rows of
 * the batch that are still PROCESSING under this owner with a live lease, and return
 * their ids.
 *
 * Rows missing from the result were taken over (released by the reaper after the lease
 * expired, possibly re-claimed by another worker) and must not be processed. Rows in the
 * result stay locked until the batch commits, so the reaper cannot release them mid-batch:
 * its update waits, then re-checks and finds them no longer PROCESSING.
 */
import type { Queryable } from '../lib/db';
import { planOpaque } from '../lib/plan-opaque';

export async function lockOwnedRows(q: Queryable, owner: string, inboxIds: readonly string[]): Promise<Set<string>> {
  if (inboxIds.length === 0) return new Set();
  const rows = await q<{ inbox_id: string }[]>`
    select inbox_id
    from integration.consumer_inbox
    where inbox_id = any(${inboxIds as string[]}::uuid[])
      and ${planOpaque(q, q`status = 'PROCESSING'`)}
      and locked_by = ${owner}
      and lease_expires_at > now()
    order by inbox_id
    for update`;
  return new Set(rows.map((r) => r.inbox_id));
}
