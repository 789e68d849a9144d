/**
 * The ingest's wake-up gate (migration 0060): after storing rows its consumer's worker must
 * process, should this batch invoke that worker?
 *
 * Only if no slot of the consumer is held and the consumer is not paused (migration 0100):
 * a held slot is a worker draining (it claims the rows just stored before it stops: it
 * leaves its slot only when nothing is due) or one invoked and starting. Then the gate
 * reserves slot 1 for the worker it is about to invoke, for `graceSeconds`: the batches
 * that follow see it held and send nothing, and if that invocation never starts, the
 * reservation lapses and a later batch tries again.
 *
 * One statement. When a worker is awake or the consumer is paused it only reads (no row
 * lock, no WAL: the gate runs once per ingest batch). Two batches that find the gate open
 * at once both try slot 1; ON CONFLICT re-checks the row the first one wrote, so only one
 * of them gets it.
 */
import type { Queryable } from '../../lib/db';
import { processingPaused } from '../../inbox/consumer-pause';

export type GateAnswer = { slotNo: number } | 'paused' | 'closed';

export async function reserveWakeUp(q: Queryable, consumerName: string, invitation: string, graceSeconds: number): Promise<GateAnswer> {
  const [row] = await q<{ paused: boolean; slot_no: number | null }[]>`
    with pause as materialized (
      select ${processingPaused(q, consumerName)} as paused
    ),
    reserved as (
      insert into integration.consumer_worker_slot as s (consumer_name, slot_no, held_by, held_until, updated_at)
      select ${consumerName}, 1, ${invitation}, now() + make_interval(secs => ${graceSeconds}), now()
      from pause p
      where not p.paused
        and not exists (
          select 1 from integration.consumer_worker_slot b
          where b.consumer_name = ${consumerName} and b.held_until > now()
        )
      on conflict (consumer_name, slot_no) do update
      set held_by = ${invitation}, held_until = now() + make_interval(secs => ${graceSeconds}), updated_at = now()
      where s.held_until is null or s.held_until <= now()
      returning s.slot_no
    )
    select p.paused, (select r.slot_no from reserved r) as slot_no
    from pause p`;
  if (row!.paused) return 'paused';
  return row!.slot_no === null ? 'closed' : { slotNo: row!.slot_no };
}
