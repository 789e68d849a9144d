/**
 * Inline mode's share of docs/design.md §3, guarantee 4: of the rows an ingest transaction just inserted
 * PROCESSING under `owner`, hand to the worker (RECEIVED, attempt refunded) every row that
 * is not alone at the head of its aggregate, and return their ids.
 *
 * A row is held back when its aggregate has another row that is waiting (RECEIVED,
 * RETRY_PENDING: it arrived earlier and must go first), or in flight under another owner
 * (a worker's batch), or an earlier row of this same batch (by aggregate version, then
 * offset, the claim's head order). The worker's claim then serializes them through their
 * aggregates' lanes (marked by the table's lane triggers): it takes an aggregate's rows
 * head first. Rows of other ingest transactions that have not committed
 * are invisible here; one aggregate lives in one partition, whose batches the event-source
 * mapping delivers one at a time.
 */
import type { Queryable } from '../lib/db';
import { sameLane } from '../lib/lane-key';
import { planOpaque } from '../lib/plan-opaque';

export async function deferBehindAggregate(q: Queryable, owner: string, inboxIds: readonly string[]): Promise<string[]> {
  if (inboxIds.length === 0) return [];
  const deferred = await q<{ inbox_id: string }[]>`
    update integration.consumer_inbox r
    set status = 'RECEIVED',
        attempt_count = 0,
        locked_by = null,
        locked_at = null,
        lease_expires_at = null,
        updated_at = now()
    where r.inbox_id = any(${inboxIds as string[]}::uuid[])
      and ${planOpaque(q, q`r.status = 'PROCESSING'`)}
      and r.locked_by = ${owner}
      and (
        -- Through consumer_inbox_open_lane_idx, by the lane key (lane-key.ts).
        exists (
          select 1 from integration.consumer_inbox o
          where ${sameLane(q, 'o', 'r')}
            and o.status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING')
            and (o.status <> 'PROCESSING'
                 or (o.inbox_id <> r.inbox_id
                     and (o.locked_by is distinct from ${owner}
                          -- this batch: aggregate_version nulls last, then offset
                          or (o.aggregate_version is null, coalesce(o.aggregate_version, 0), o.topic_name, o.partition_no, o.offset_no)
                             < (r.aggregate_version is null, coalesce(r.aggregate_version, 0), r.topic_name, r.partition_no, r.offset_no))))))
    returning r.inbox_id`;
  return deferred.map((row) => row.inbox_id);
}
