/**
 * The ingest's after-write: wake the consumer's worker when the batch left it rows and no
 * worker is awake (docs/worker.md, "Wake-ups").
 */
import type { WakeUpResult } from '../../ingest/batch-report';
import type { WakeUpScope, WorkerWakeUp } from '../../ingest/ingest';
import { INVITATION_GRACE_SECONDS, reportGateFailure, sendWakeUp, type WorkerTarget } from './wake-up';
import { reserveWakeUp } from './wake-up-gate';

/** The ingest's wake-up (its `wakeUp` dependency) that wakes the worker function `target`. */
export function wakeUpsTo(target: WorkerTarget): WorkerWakeUp {
  return (scope, requestId) => wakeWorker(scope, target, requestId);
}

/**
 * After the batch is stored, never before: the woken worker must find its rows. Nothing
 * here can fail the batch or change its response; it costs one statement (which only
 * reads while a worker is awake) and, when the gate opens, one asynchronous Invoke.
 */
export async function wakeWorker(deps: WakeUpScope, target: WorkerTarget, requestId: string): Promise<WakeUpResult> {
  const { sql, consumerName, logger, metrics } = deps;
  const invitation = `wake-up:${requestId}`;
  let slot: Awaited<ReturnType<typeof reserveWakeUp>>;
  try {
    slot = await reserveWakeUp(sql, consumerName, invitation, INVITATION_GRACE_SECONDS);
  } catch (error) {
    reportGateFailure({ logger, metrics }, consumerName, 'wake-up', error);
    return 'failed';
  }
  if (slot === 'closed') return 'gate-closed';
  if (slot === 'paused') return 'paused';
  const sent = await sendWakeUp(target, { source: 'wake-up', consumerName, slot: slot.slotNo, invitation }, { logger, metrics });
  return sent ? 'sent' : 'failed';
}
