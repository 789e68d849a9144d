/**
 * What a plain worker invocation (the schedule's every minute, ops resume's) asks first, in
 * one statement: is its consumer's processing paused (migration 0100), and is any of its
 * lanes due. With nothing due it takes no slot and returns: an idle consumer costs its
 * scheduled worker this one read, a primary-key probe and the first entry of
 * consumer_lane_due_idx, and no write.
 */
import type { Queryable } from '../../lib/db';
import { dueLanes } from './count-due-lanes';
import type { PauseRow } from '../../inbox/consumer-pause';

export interface WorkerGate {
  /** The consumer's processing pause, or null. */
  pause: Pick<PauseRow, 'paused_by' | 'paused_at'> | null;
  /** Some lane of the consumer is due (a claim could take its head now). */
  due: boolean;
}

export async function workerGate(q: Queryable, consumerName: string): Promise<WorkerGate> {
  const [row] = await q<{ paused_by: string | null; paused_at: Date | null; due: boolean }[]>`
    select p.paused_by, p.paused_at, exists (${dueLanes(q, consumerName)}) as due
    from (select 1) as one
    left join integration.consumer_pause p on p.consumer_name = ${consumerName} and p.target = 'worker'`;
  const { paused_by, paused_at, due } = row!;
  return { pause: paused_by === null ? null : { paused_by, paused_at: paused_at! }, due };
}
