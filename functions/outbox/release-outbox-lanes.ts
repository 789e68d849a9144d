/**
 * A relay hands its outbox lanes back once their rows' outcomes are recorded (in the same
 * transaction): unlocked, due when their head is, or deleted when nothing is left in them.
 * As with the worker's lanes (before they became a pure index of queued work, functions/inbox/lanes.ts): the relay knows what it
 * published and whether the claim saw more; what was emitted while it held the lane, the
 * outbox's lane trigger marked by setting due_at, which UPDATE reads from the lane's latest
 * version, so the lane is due by the earlier of the two and a lane with new rows is never
 * deleted (the delete re-checks due_at on the latest version too). Fenced on the owner: a
 * lane taken over after this relay's lease expired is left alone.
 */
import type { Queryable } from '../lib/db';
import { byConsumerLaneKey } from '../lib/lane-key';

export interface OutboxLaneRelease {
  consumerName: string;
  aggregateType: string;
  aggregateId: string;
  /** Seconds from now until the lane's head is due (0: now); null when the relay left nothing unpublished. */
  dueInSeconds: number | null;
}

export async function releaseOutboxLanes(q: Queryable, owner: string, lanes: readonly OutboxLaneRelease[]): Promise<void> {
  if (lanes.length === 0) return;
  // Lock order "C", as the lane trigger's: never a deadlock with an emitter.
  const sorted = [...lanes].sort(byConsumerLaneKey);
  const consumers = sorted.map((l) => l.consumerName);
  const types = sorted.map((l) => l.aggregateType);
  const ids = sorted.map((l) => l.aggregateId);
  const dues = sorted.map((l) => l.dueInSeconds);
  // Issued together: the delete runs after the update, on the same connection, and sees it.
  await Promise.all([
    q`
      update integration.outbox_lane l
      set locked_by = null,
          locked_at = null,
          lease_expires_at = null,
          due_at = least(l.due_at, now() + make_interval(secs => v.due_in_seconds)),
          updated_at = now()
      from unnest(${consumers}::text[], ${types}::text[], ${ids}::text[], ${dues as (number | null)[]}::float8[])
           as v(consumer_name, aggregate_type, aggregate_id, due_in_seconds)
      where l.consumer_name = v.consumer_name
        and l.aggregate_type = v.aggregate_type
        and l.aggregate_id = v.aggregate_id
        and l.locked_by = ${owner}`,
    // The lanes left idle: deleted by integration.delete_idle_outbox_lanes (migration 0200),
    // whose DELETE re-checks locked_by and due_at on the lanes' latest versions.
    q`select integration.delete_idle_outbox_lanes(${consumers}::text[], ${types}::text[], ${ids}::text[])`,
  ]);
}
