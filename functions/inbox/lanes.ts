/**
 * What moves lanes (migration 0050) besides the claim and consumer_inbox's triggers.
 *
 * Waking: a lane whose rows waited behind rows in flight (due_at null) is due again when
 * those rows leave PROCESSING for good. The trigger marks a lane for every row queued (a
 * retry, a hand-back, a release), not for rows finished: the writer that finishes them
 * wakes their lanes, in the same transaction: the worker after its batch, the reaper for a
 * lease whose last attempt ended QUARANTINED. (A trigger would see every completion of every
 * batch; a row trigger costs a call per row, a statement trigger's transition tables more.)
 * The reaper also wakes, once a minute, lanes left waiting with nothing in flight: rows
 * some other writer finished.
 *
 * Holds (quarantine policy hold-aggregate, functions/framework/types.ts): while a row of an
 * aggregate is QUARANTINED, its lane names it in held_by and is never claimed, so the rows
 * behind it wait, unclaimed and with no attempt spent. The trigger ends a hold when its row
 * leaves QUARANTINED, whoever moves it.
 */
import type { Queryable } from '../lib/db';
import { byLaneKey, sameLane, type LaneKey } from '../lib/lane-key';

export { byLaneKey, type LaneKey };

export interface LaneHold {
  aggregateType: string;
  aggregateId: string;
  /** The QUARANTINED row that holds the aggregate. */
  heldBy: string;
}

/**
 * Wake the lanes of a batch whose rows left PROCESSING: due now, where they wait (due_at
 * null) and are not held. Lanes the batch emptied no longer exist; a lane whose head now
 * backs off was given its due time by the trigger and is left so. The consumer travels as
 * a column beside the key, not as a constant, so that the only index path is one
 * primary-key probe per lane (with `consumer_name = $1` the planner may read every lane of
 * the consumer through the key's prefix when the lane table was never analyzed).
 */
export async function wakeLanes(q: Queryable, consumerName: string, lanes: readonly LaneKey[]): Promise<void> {
  if (lanes.length === 0) return;
  const sorted = [...lanes].sort(byLaneKey);
  await q`
    update integration.consumer_lane l
    set due_at = now(), updated_at = now()
    from unnest(${sorted.map(() => consumerName)}::text[], ${sorted.map((l) => l.aggregateType)}::text[],
                ${sorted.map((l) => l.aggregateId)}::text[]) as v(consumer_name, aggregate_type, aggregate_id)
    where l.consumer_name = v.consumer_name
      and l.aggregate_type = v.aggregate_type
      and l.aggregate_id = v.aggregate_id
      and l.due_at is null
      and l.held_by is null`;
}

/**
 * A CTE (named `woken`) that wakes, the same way, the lanes of rows a statement moved out
 * of PROCESSING for good: `rowsCte` names the statement's CTE of those rows (columns
 * status, consumer_name, aggregate_type, aggregate_id); its QUARANTINED rows count.
 */
export function wakeLanesOf(q: Queryable, rowsCte: string) {
  return q`
    woken as (
      update integration.consumer_lane l
      set due_at = now(), updated_at = now()
      from (select distinct consumer_name, aggregate_type, aggregate_id from ${q(rowsCte)} where status = 'QUARANTINED') r
      where l.consumer_name = r.consumer_name
        and l.aggregate_type = r.aggregate_type
        and l.aggregate_id = r.aggregate_id
        and l.due_at is null
        and l.held_by is null
    )`;
}

/**
 * Wake lanes left waiting (due_at null, not held) whose aggregate has nothing in flight:
 * the rows they waited for were finished by a writer that did not wake them. Returns how many.
 */
export async function wakeStrandedLanes(q: Queryable, consumerName: string, limit: number): Promise<number> {
  const result = await q`
    update integration.consumer_lane l
    set due_at = now(), updated_at = now()
    where l.ctid = any(array(
        select w.ctid
        from integration.consumer_lane w
        where w.consumer_name = ${consumerName}
          and w.due_at is null
          and w.held_by is null
          and not exists (
            select 1 from integration.consumer_inbox p
            where ${sameLane(q, 'p', 'w')}
              and p.status = 'PROCESSING')
        limit ${limit}
        for update skip locked))
      and l.due_at is null`;
  return result.count;
}

/** Hold these lanes (created if missing): the worker, when a run stops at a quarantine. */
export async function holdLanes(q: Queryable, consumerName: string, holds: readonly LaneHold[]): Promise<void> {
  if (holds.length === 0) return;
  const sorted = [...holds].sort(byLaneKey);
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
