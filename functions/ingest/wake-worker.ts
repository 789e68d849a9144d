/**
 * The ingest's after-write: wake the consumer's worker when the batch left it rows and no
 * worker is awake (docs/worker.md, "Wake-ups").
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { reserveWakeUp } from '../inbox/wake-up-gate';
import type { Sql } from '../lib/db';
import { INVITATION_GRACE_SECONDS, reportGateFailure, sendWakeUp, type WorkerTarget } from '../lib/wake-up';

/** Sent a wake-up, found one awake or on its way (the gate was closed), found the consumer paused, or failed. */
export type WakeUpResult = 'sent' | 'gate-closed' | 'paused' | 'failed';

export interface WakeWorkerDeps {
  sql: Sql;
  consumerName: string;
  logger: Logger;
  metrics: Metrics;
}

/**
 * After the batch is stored, never before: the woken worker must find its rows. Nothing
 * here can fail the batch or change its response; it costs one statement (which only
 * reads while a worker is awake) and, when the gate opens, one asynchronous Invoke.
 */
export async function wakeWorker(deps: WakeWorkerDeps, target: WorkerTarget, requestId: string): Promise<WakeUpResult> {
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
