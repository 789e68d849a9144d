/**
 * A worker invocation's slot (migration 0060): the one thing that bounds how many workers
 * of a consumer drain at once.
 *
 * A worker takes a slot before it claims anything — the one an invitation reserved for it,
 * else any free one — and drains only while it holds it. The hold is short and renewed
 * while the worker is awake, and never outlives the invocation, so a worker that died
 * frees its slot by itself. It leaves the slot when it goes idle, when its budget ends
 * (then, with work due, it hands the slot to a successor it invokes), or when it fails.
 *
 * Reserving works like the claim: free slots are locked FOR UPDATE SKIP LOCKED and
 * re-checked on their latest version, so two reservers never get the same slot, and no
 * lock is shared by everyone who reserves.
 */
import type { Queryable } from '../../lib/db';
import { processingPaused } from '../../inbox/consumer-pause';
import { dueLanes } from './count-due-lanes';

export interface SlotRef {
  consumerName: string;
  slotNo: number;
}

/**
 * Slots 1..count exist for the consumer (created by the first worker that runs; never
 * deleted). Slots above a lowered maximum stay, unused: reservations only look below it.
 */
export async function ensureSlots(q: Queryable, consumerName: string, count: number): Promise<void> {
  await q`
    insert into integration.consumer_worker_slot (consumer_name, slot_no)
    select ${consumerName}, n from generate_series(1, ${count}::int) as n
    on conflict (consumer_name, slot_no) do nothing`;
}

/** Take the slot an invitation reserved, if it still holds it (even if its hold lapsed meanwhile: nobody took it). */
export async function takeInvitedSlot(
  q: Queryable,
  slot: SlotRef & { invitation: string; owner: string; holdSeconds: number },
): Promise<boolean> {
  const rows = await q`
    update integration.consumer_worker_slot s
    set held_by = ${slot.owner},
        held_until = now() + make_interval(secs => ${slot.holdSeconds}),
        updated_at = now()
    where s.consumer_name = ${slot.consumerName}
      and s.slot_no = ${slot.slotNo}
      and s.held_by = ${slot.invitation}
    returning 1`;
  return rows.length === 1;
}

/** Free a slot reserved for an invited worker that will not drain (its consumer is paused). */
export async function dropInvitation(q: Queryable, slot: SlotRef & { invitation: string }): Promise<void> {
  await q`
    update integration.consumer_worker_slot s
    set held_by = null, held_until = null, updated_at = now()
    where s.consumer_name = ${slot.consumerName}
      and s.slot_no = ${slot.slotNo}
      and s.held_by = ${slot.invitation}`;
}

export interface Reserve {
  consumerName: string;
  /** Slots 1..maxSlots are the consumer's. */
  maxSlots: number;
  /** How many to reserve at most. */
  count: number;
  seconds: number;
}

/**
 * Reserve up to `count` free slots, lowest first: held_by is `holder`, or with `perSlot`
 * `holder:<slot>` (each invited worker presents its own). Returns what was reserved.
 */
async function reserveFree(q: Queryable, r: Reserve, holder: string, perSlot: boolean): Promise<{ slotNo: number; heldBy: string }[]> {
  if (r.count <= 0) return [];
  const rows = await q<{ slot_no: number; held_by: string }[]>`
    with free as materialized (
      select f.slot_no
      from integration.consumer_worker_slot f
      where f.consumer_name = ${r.consumerName}
        and f.slot_no <= ${r.maxSlots}
        and (f.held_until is null or f.held_until <= now())
        -- A paused consumer's workers take no slot, and nobody reserves one for a worker to invoke.
        and not ${processingPaused(q, r.consumerName)}
      order by f.slot_no
      limit ${r.count}
      for update skip locked
    )
    update integration.consumer_worker_slot s
    set held_by = case when ${perSlot}::boolean then ${holder} || ':' || s.slot_no else ${holder} end,
        held_until = now() + make_interval(secs => ${r.seconds}),
        updated_at = now()
    where s.consumer_name = ${r.consumerName}
      and s.slot_no in (select slot_no from free)
    returning s.slot_no, s.held_by`;
  return rows.map((row) => ({ slotNo: row.slot_no, heldBy: row.held_by })).sort((a, b) => a.slotNo - b.slotNo);
}

/** Take the lowest free slot for this worker; null when every slot is held. */
export async function takeFreeSlot(q: Queryable, r: Omit<Reserve, 'count'> & { owner: string }): Promise<number | null> {
  const [taken] = await reserveFree(q, { ...r, count: 1 }, r.owner, false);
  return taken?.slotNo ?? null;
}

/**
 * Reserve free slots for workers about to be invoked, so that with the workers already
 * awake (held slots, this one's included) there are `wanted` in all, never more than the
 * slots. Each reservation's held_by is the invitation its worker presents.
 */
export async function reserveInvitations(
  q: Queryable,
  r: Omit<Reserve, 'count'> & { wanted: number; prefix: string },
): Promise<{ slotNo: number; invitation: string }[]> {
  const [busy] = await q<{ n: number }[]>`
    select count(*)::int as n
    from integration.consumer_worker_slot s
    where s.consumer_name = ${r.consumerName} and s.slot_no <= ${r.maxSlots} and s.held_until > now()`;
  const reserved = await reserveFree(q, { ...r, count: Math.min(r.wanted, r.maxSlots) - busy!.n }, r.prefix, true);
  return reserved.map((s) => ({ slotNo: s.slotNo, invitation: s.heldBy }));
}

/** Extend this worker's hold; false when the slot is no longer its own (it lapsed and was taken). */
export async function renewSlot(q: Queryable, slot: SlotRef & { owner: string; holdSeconds: number }): Promise<boolean> {
  const rows = await q`
    update integration.consumer_worker_slot s
    set held_until = now() + make_interval(secs => ${slot.holdSeconds}), updated_at = now()
    where s.consumer_name = ${slot.consumerName}
      and s.slot_no = ${slot.slotNo}
      and s.held_by = ${slot.owner}
    returning 1`;
  return rows.length === 1;
}

/**
 * What a worker does with its slot when it would stop, given whether any lane of the
 * consumer is due (claimable now, and the consumer not paused):
 *   stay       idle: with work due, keep the slot (and go on draining); else free it
 *   hand-over  budget spent: with work due, turn the slot into an invitation for a
 *              successor (the caller invokes it); else free it
 *   leave      free it, whatever is due (the worker failed)
 *
 * Freeing the slot and looking for due lanes are one statement, so a worker never leaves
 * rows behind that an ingest batch saw it awake for — except those stored while this one
 * statement runs: the schedule and the next ingest batch are the net for that window.
 */
export type LeaveMode = 'stay' | 'hand-over' | 'leave';

export type LeaveOutcome = 'stayed' | 'handed-over' | 'left' | 'not-held';

export async function leaveSlot(
  q: Queryable,
  slot: SlotRef & { owner: string; mode: LeaveMode; invitation?: string; graceSeconds?: number },
): Promise<LeaveOutcome> {
  const handOver = slot.mode === 'hand-over' && slot.invitation !== undefined;
  const [row] = await q<{ held: boolean; changed: string | null | undefined; changed_rows: number }[]>`
    with due as materialized (
      -- Work paused is no work due: a worker of a paused consumer neither stays nor hands over.
      select exists (${dueLanes(q, slot.consumerName)}) and not ${processingPaused(q, slot.consumerName)} as any_due
    ),
    changed as (
      update integration.consumer_worker_slot s
      set held_by = case when d.any_due and ${handOver}::boolean then ${slot.invitation ?? null}::text end,
          held_until = case when d.any_due and ${handOver}::boolean then now() + make_interval(secs => ${slot.graceSeconds ?? 0}) end,
          updated_at = now()
      from due d
      where s.consumer_name = ${slot.consumerName}
        and s.slot_no = ${slot.slotNo}
        and s.held_by = ${slot.owner}
        and not (d.any_due and ${slot.mode === 'stay'}::boolean)
      returning s.held_by
    )
    select exists (
             select 1 from integration.consumer_worker_slot s
             where s.consumer_name = ${slot.consumerName} and s.slot_no = ${slot.slotNo} and s.held_by = ${slot.owner}
           ) as held,
           (select count(*)::int from changed) as changed_rows,
           (select held_by from changed) as changed`;
  if (!row!.held) return 'not-held';
  if (row!.changed_rows === 0) return 'stayed';
  return row!.changed !== null && row!.changed !== undefined ? 'handed-over' : 'left';
}
