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
 * One probe per processed row of the lane's open rows index at (lane, v + 1): the lane key
 * in "C" (functions/lib/lane-key.ts), so no other index serves it whatever the statistics.
 */
import type { Queryable } from '../lib/db';
import { ErrorCodes } from '../lib/errors';
import { byLaneKey, laneKey, laneKeyOf, type LaneKey } from '../lib/lane-key';

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
    from unnest(${sorted.map((p) => p.aggregateType)}::text[], ${sorted.map((p) => p.aggregateId)}::text[],
                ${sorted.map((p) => p.version)}::bigint[]) as d(aggregate_type, aggregate_id, version)
    where ${laneKeyOf(q, 'h')} = ${laneKey(q, q`${consumerName}::text`, q('d.aggregate_type'), q('d.aggregate_id'))}
      and h.aggregate_version = d.version + 1
      and h.status = 'RETRY_PENDING'
      and h.error_code = ${ErrorCodes.AGGREGATE_VERSION_GAP}
      and h.next_attempt_at > now()
    returning h.inbox_id`;
  return rows.map((r) => r.inbox_id);
}
