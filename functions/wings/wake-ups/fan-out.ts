/**
 * Fan-out: an awake worker that finds more due than it can drain alone soon invites more
 * workers of its consumer, up to the slots (docs/worker.md, "Wake-ups").
 */
import { performance } from 'node:perf_hooks';
import { countDueLanes } from './count-due-lanes';
import { reserveInvitations } from './worker-slot';
import { INVITATION_GRACE_SECONDS, reportGateFailure, type WorkerTarget } from './wake-up';
import type { BatchStats } from '../../worker/run-worker';
import { wakeInvited, type SlotSession } from './slot-session';

/** A worker weighs fanning out at most this often: the backlog count is cheap, not free. */
const FAN_OUT_CHECK_MS = 1_000;

/** The most due lanes one backlog count reads. */
const MAX_BACKLOG_COUNT = 100_000;

export interface FanOutPolicy {
  self: WorkerTarget | undefined;
  maxSlots: number;
  /** The fan-out horizon: how long the backlog may take this worker alone to drain. */
  drainSeconds: number;
  safetyMarginMs: number;
  remainingMs: () => number;
}

/** What a session's fan-outs did, and when it last weighed one. */
export interface FanOutState {
  checkedAt: number;
  fannedOut: number;
}

/**
 * Fan out when the backlog would take this worker alone longer than the horizon (the
 * configured drain time, or what is left of its budget if less) to drain, at the rate it
 * has drained lanes so far: as many workers in all as that takes, up to the slots.
 */
export async function fanOut(session: SlotSession, policy: FanOutPolicy, state: FanOutState, batch: BatchStats): Promise<void> {
  const { self, maxSlots } = policy;
  if (self === undefined || maxSlots <= 1 || !batch.full || batch.busyMs <= 0) return;
  if (performance.now() - state.checkedAt < FAN_OUT_CHECK_MS) return;
  state.checkedAt = performance.now();
  const horizonSeconds = Math.min(policy.drainSeconds, (policy.remainingMs() - policy.safetyMarginMs) / 1000);
  if (horizonSeconds <= 0) return;
  const perWorker = Math.max(1, (batch.totalLanes / batch.busyMs) * 1000 * horizonSeconds);
  const { sql, consumerName, logger, metrics } = session.scope;
  try {
    const backlog = await countDueLanes(sql, consumerName, Math.min(MAX_BACKLOG_COUNT, Math.ceil(perWorker * maxSlots)));
    const wanted = Math.min(maxSlots, Math.ceil(backlog / perWorker));
    if (wanted <= 1) return;
    const invitations = await reserveInvitations(sql, {
      consumerName,
      maxSlots,
      wanted,
      prefix: `fan-out:${session.owner}`,
      seconds: INVITATION_GRACE_SECONDS,
    });
    if (invitations.length === 0) return;
    state.fannedOut += await wakeInvited(session.scope, self, invitations, 'fan-out');
    logger.info('worker_fanned_out', { consumerName, dueLanes: backlog, wanted, invited: invitations.length });
  } catch (error) {
    reportGateFailure({ logger, metrics }, consumerName, 'fan-out', error);
  }
}
