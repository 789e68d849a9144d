/**
 * Make due, now, the rows that waited for a version just processed.
 *
 * A versioned event that arrives before its predecessor is held: RETRY_PENDING with
 * AGGREGATE_VERSION_GAP, due again after the consumer's versionGapRetrySeconds. Once the
 * predecessor is processed, waiting longer gains nothing: in the transaction that finishes
 * version v of an aggregate, its row v + 1 held for a gap becomes due now. The lane trigger
 * (migration 0050) marks its lane due, and the worker that finished v, or the next claim,
 * takes it. Only held rows change, and only a gap's retry moves earlier: no attempt is
 * spent or refunded, and a row whose predecessor is still missing keeps its time.
 *
 * One probe per processed row of the lane's open rows index at (lane, v + 1), whatever the
 * statistics: a lateral subquery per row (OFFSET 0 keeps it one), so no plan reads every
 * open row of the consumer through the index's prefix, which the row security policy's
 * consumer condition would otherwise offer; the lane key in "C" (functions/lib/lane-key.ts),
 * so no other index serves the probe; the statuses the open rows index holds as its
 * condition, and what a held row is as a filter no index can prove (plan-opaque.ts), so the
 * seed's retry index — every RECEIVED and RETRY_PENDING row since the last VACUUM — is no
 * path either. The next version travels computed (`v + 1` in SQL is not leakproof, and under
 * row security a condition that is not would be a filter, not the index's). The row is then
 * updated by its ctid.
 */
import type { Queryable } from '../lib/db';
import { ErrorCodes } from '../lib/errors';
import { byLaneKey, laneKey, laneKeyOf, type LaneKey } from '../lib/lane-key';
import { planOpaque } from '../lib/plan-opaque';

export interface ProcessedVersion extends LaneKey {
  version: number;
}

/** Returns the ids of the rows made due. */
export async function releaseSuccessors(q: Queryable, consumerName: string, processed: readonly ProcessedVersion[]): Promise<string[]> {
  if (processed.length === 0) return [];
  // In lane order, the order every statement that locks several lanes follows (the
  // trigger writes the lane of each row made due).
  const sorted = [...processed].sort(byLaneKey);
  const rows = await q<{ inbox_id: string }[]>`
    update integration.consumer_inbox h
    set next_attempt_at = now(), updated_at = now()
    from unnest(${sorted.map(() => consumerName)}::text[], ${sorted.map((p) => p.aggregateType)}::text[],
                ${sorted.map((p) => p.aggregateId)}::text[], ${sorted.map((p) => p.version + 1)}::bigint[])
           as d(consumer_name, aggregate_type, aggregate_id, next_version)
         cross join lateral (
           select s.ctid
           from integration.consumer_inbox s
           where ${laneKeyOf(q, 's')} = ${laneKey(q, q('d.consumer_name'), q('d.aggregate_type'), q('d.aggregate_id'))}
             and s.aggregate_version = d.next_version
             and s.status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING')
             and ${planOpaque(
               q,
               q`s.status = 'RETRY_PENDING' and s.error_code = ${ErrorCodes.AGGREGATE_VERSION_GAP} and s.next_attempt_at > now()`,
             )}
           offset 0
         ) held
    where h.ctid = held.ctid
    returning h.inbox_id`;
  return rows.map((r) => r.inbox_id);
}
