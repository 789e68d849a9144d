/**
 * Holds on lanes (quarantine policy hold-aggregate, functions/consumers/types.ts): while a
 * row of an aggregate is QUARANTINED, its lane names it in held_by and is never claimed, so
 * the rows behind it wait, unclaimed and with no attempt spent. consumer_inbox's lane
 * trigger ends a hold when its row leaves QUARANTINED, whoever moves it (migration 0050).
 */
import type { Queryable } from '../lib/db';

export interface LaneHold {
  aggregateType: string;
  aggregateId: string;
  /** The QUARANTINED row that holds the aggregate. */
  heldBy: string;
}

/**
 * UTF-8 byte order, which is `collate "C"`: every statement that locks several lanes locks
 * them in this order (consumer_inbox's lane triggers sort the same way), so two of them
 * never deadlock.
 */
export function compareLaneKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Hold these lanes (created if missing): the worker, when a run stops at a quarantine. */
export async function holdLanes(q: Queryable, consumerName: string, holds: readonly LaneHold[]): Promise<void> {
  if (holds.length === 0) return;
  const sorted = [...holds].sort((a, b) => compareLaneKeys(a.aggregateType, b.aggregateType) || compareLaneKeys(a.aggregateId, b.aggregateId));
  await q`
    insert into integration.consumer_lane as l (consumer_name, aggregate_type, aggregate_id, held_by)
    select v.consumer_name, v.aggregate_type, v.aggregate_id, v.held_by
    from unnest(${sorted.map(() => consumerName)}::text[], ${sorted.map((h) => h.aggregateType)}::text[],
                ${sorted.map((h) => h.aggregateId)}::text[], ${sorted.map((h) => h.heldBy)}::uuid[])
         as v(consumer_name, aggregate_type, aggregate_id, held_by)
    on conflict (consumer_name, aggregate_type, aggregate_id)
    do update set held_by = excluded.held_by, updated_at = now()`;
}

/**
 * A CTE (named `held`) that holds the lanes of rows a statement QUARANTINED (the reaper:
 * an expired lease that was the last attempt). `rowsCte` names the statement's CTE of
 * those rows (columns inbox_id, status, consumer_name, aggregate_type, aggregate_id,
 * aggregate_version, received_at, offset_no); a lane is held by its first quarantined row
 * in head order.
 */
export function holdLanesOf(q: Queryable, rowsCte: string) {
  const rows = q(rowsCte);
  return q`
    held as (
      insert into integration.consumer_lane as l (consumer_name, aggregate_type, aggregate_id, held_by)
      select f.consumer_name, f.aggregate_type, f.aggregate_id, f.inbox_id
      from (
        select distinct on (r.consumer_name, r.aggregate_type, r.aggregate_id)
               r.consumer_name, r.aggregate_type, r.aggregate_id, r.inbox_id
        from ${rows} r
        where r.status = 'QUARANTINED'
        order by r.consumer_name, r.aggregate_type, r.aggregate_id, r.aggregate_version nulls last, r.received_at, r.offset_no
      ) f
      order by f.consumer_name collate "C", f.aggregate_type collate "C", f.aggregate_id collate "C"
      on conflict (consumer_name, aggregate_type, aggregate_id)
      do update set held_by = excluded.held_by, updated_at = now()
    )`;
}

/**
 * End holds whose row is no longer QUARANTINED (the lane trigger ends a hold when the row
 * is updated; this catches a row deleted, or changed with triggers off): due now. Returns
 * how many.
 */
export async function releaseStaleHolds(q: Queryable, consumerName: string, limit: number): Promise<number> {
  const result = await q`
    update integration.consumer_lane l
    set held_by = null, due_at = now(), updated_at = now()
    where l.ctid = any(array(
        select h.ctid
        from integration.consumer_lane h
        where h.held_by is not null
          and h.consumer_name = ${consumerName}
          and not exists (
            select 1 from integration.consumer_inbox i
            where i.inbox_id = h.held_by and i.status = 'QUARANTINED')
        limit ${limit}
        for update skip locked))`;
  return result.count;
}
