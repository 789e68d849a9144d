/**
 * The ways a lane locked by a worker (claim-due.ts, migration 0050) is let go.
 *
 * releaseLanes: a worker hands its lanes back once their batch is done: unlocked, due when
 * their new head is, or deleted when nothing is left in them. The worker says when each
 * lane's head is due from what it knows: the claim saw the row after the run, and the
 * batch knows which row failed and when it retries. What the worker cannot know is what
 * was queued while it had the lane: consumer_inbox's lane triggers mark a locked lane by
 * setting its due_at. UPDATE reads that from the lane's latest row version, so the lane is
 * due by the earlier of the two: a row queued mid-batch is never stranded behind a lane
 * the worker believed empty. Fenced on the owner: a lane the reaper gave back after this
 * worker's lease expired (and perhaps another worker claimed since) is left alone. Runs in
 * the batch's transaction, so the lanes are released with the outcomes that decided their
 * due times, or not at all.
 *
 * unlockLanesOf: the reaper's release of expired leases hands their lanes back in the same
 * statement. freeAbandonedLanes: the reaper's safety net for a lane locked with no row in
 * flight (a writer that moved the rows without releasing the lane).
 */
import type { Queryable } from '../lib/db';

export interface LaneRelease {
  aggregateType: string;
  aggregateId: string;
  /** Seconds from now until the lane's head is due (0: now); null when nothing is queued. */
  dueInSeconds: number | null;
  /** The QUARANTINED row that holds the lane (quarantine policy hold-aggregate). */
  heldBy?: string | undefined;
}

export async function releaseLanes(q: Queryable, consumerName: string, owner: string, lanes: readonly LaneRelease[]): Promise<void> {
  if (lanes.length === 0) return;
  const sorted = [...lanes].sort(byLane);
  // The consumer travels as a column beside the key, not as a constant: with a constant
  // `consumer_name = $1` the planner may read every lane of the consumer through the
  // primary key's prefix (statistics of a lane table never analyzed say it has few);
  // with the whole key coming from the list, the only index path is one primary-key
  // probe per lane, and the alternative, a scan, costs what the planner can see.
  const consumers = sorted.map(() => consumerName);
  const types = sorted.map((l) => l.aggregateType);
  const ids = sorted.map((l) => l.aggregateId);
  const dues = sorted.map((l) => l.dueInSeconds);
  const holds = sorted.map((l) => l.heldBy ?? null);
  // Issued together: the delete runs after the update, on the same connection, and sees it.
  await Promise.all([
    q`
      update integration.consumer_lane l
      set locked_by = null,
          locked_at = null,
          due_at = least(l.due_at, now() + make_interval(secs => v.due_in_seconds)),
          held_by = v.held_by,
          updated_at = now()
      from unnest(${consumers}::text[], ${types}::text[], ${ids}::text[], ${dues as (number | null)[]}::float8[], ${holds}::uuid[])
           as v(consumer_name, aggregate_type, aggregate_id, due_in_seconds, held_by)
      where l.consumer_name = v.consumer_name
        and l.aggregate_type = v.aggregate_type
        and l.aggregate_id = v.aggregate_id
        and l.locked_by = ${owner}`,
    q`
      delete from integration.consumer_lane l
      using unnest(${consumers}::text[], ${types}::text[], ${ids}::text[]) as v(consumer_name, aggregate_type, aggregate_id)
      where l.consumer_name = v.consumer_name
        and l.aggregate_type = v.aggregate_type
        and l.aggregate_id = v.aggregate_id
        and l.locked_by is null
        and l.held_by is null
        and l.due_at is null`,
  ]);
}

/**
 * UTF-8 byte order, which is `collate "C"`: every statement that locks several lanes locks
 * them in this order (consumer_inbox's lane triggers sort the same way), so two of them never deadlock.
 */
export function compareLaneKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

export function byLane(a: { aggregateType: string; aggregateId: string }, b: { aggregateType: string; aggregateId: string }): number {
  return compareLaneKeys(a.aggregateType, b.aggregateType) || compareLaneKeys(a.aggregateId, b.aggregateId);
}

/**
 * A CTE (named `unlocked`) that hands back the lanes of rows a statement took from the
 * worker whose lease expired: `rowsCte` names the statement's CTE of those rows (columns
 * inbox_id, status, consumer_name, aggregate_type, aggregate_id, aggregate_version,
 * received_at, offset_no, locked_by_before). A lane locked by anyone else is left alone;
 * the lane triggers mark the lanes due when the statement ends.
 *
 * holdOnQuarantine (quarantine policy hold-aggregate): a lane whose released rows include
 * one that was QUARANTINED is held by the first of them in head order.
 */
export function unlockLanesOf(q: Queryable, rowsCte: string, options: { holdOnQuarantine: boolean }) {
  const rows = q(rowsCte);
  const hold = options.holdOnQuarantine
    ? q`coalesce((
          select x.inbox_id from ${rows} x
          where x.status = 'QUARANTINED' and x.consumer_name = l.consumer_name
            and x.aggregate_type = l.aggregate_type and x.aggregate_id = l.aggregate_id
          order by x.aggregate_version nulls last, x.received_at, x.offset_no
          limit 1), l.held_by)`
    : q`l.held_by`;
  return q`
    unlocked as (
      update integration.consumer_lane l
      set locked_by = null, locked_at = null, held_by = ${hold}, updated_at = now()
      from (select distinct consumer_name, aggregate_type, aggregate_id, locked_by_before from ${rows}) r
      where l.consumer_name = r.consumer_name
        and l.aggregate_type = r.aggregate_type
        and l.aggregate_id = r.aggregate_id
        and l.locked_by = r.locked_by_before
    )`;
}

/**
 * Free lanes locked for longer than `lockedSeconds` (longer than any invocation can run) whose
 * owner has no PROCESSING row in them: due now, unlocked. Returns how many.
 */
export async function freeAbandonedLanes(q: Queryable, consumerName: string, lockedSeconds: number, limit: number): Promise<number> {
  const result = await q`
    update integration.consumer_lane l
    set locked_by = null, locked_at = null, due_at = now(), updated_at = now()
    where l.ctid = any(array(
        select h.ctid
        from integration.consumer_lane h
        where h.consumer_name = ${consumerName}
          and h.locked_by is not null
          and h.locked_at < now() - make_interval(secs => ${lockedSeconds})
        order by h.locked_at
        limit ${limit}
        for update skip locked))
      and not exists (
        select 1 from integration.consumer_inbox i
        where array[i.consumer_name, i.aggregate_type, i.aggregate_id] = array[l.consumer_name, l.aggregate_type, l.aggregate_id]
          and i.status = 'PROCESSING'
          and i.locked_by = l.locked_by)`;
  return result.count;
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
