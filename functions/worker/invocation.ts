/**
 * One worker invocation, whoever invoked it: the schedule (every minute, the safety net),
 * the ingest function that stored rows and found nobody awake, or another worker (fanning
 * out, or handing over at the end of its budget). What the Lambda handler runs, and what
 * the local run's simulated Lambda runs.
 *
 *   paused?             the consumer's processing is paused (ops pause): free the slot an
 *                       invitation reserved for it, claim nothing, invoke nobody, return
 *   take a slot         the one an invitation reserved for it, else the lowest free one;
 *                       none free: the consumer's maximum of workers is awake, return
 *   drain, awake        runWorker, renewing the slot, until nothing has been due for the
 *                       idle interval or the budget is spent
 *   fan out             after a full claim (at most once a second): when the due lanes would
 *                       take this worker alone longer than the fan-out horizon to drain,
 *                       reserve free slots for as many workers as that takes and invoke them
 *   leave               idle: free the slot, unless work is due (then go on draining);
 *                       budget spent with work due: turn the slot into an invitation and
 *                       invoke a successor; failed: free it
 *
 * The slots bound the workers of a consumer (migration 0060); where a stage reserves
 * concurrency for the worker function, Lambda bounds them once more (cdk/constructs/consumer-worker.ts).
 * The pause (migration 0100) is checked here once, and again by every statement that takes
 * work or starts a worker (the claim, the fan-out's reservations, the hand-over), so a
 * pause that lands while a worker drains stops it at its next claim.
 * Nothing here is needed for correctness — claims, leases and fences are — only for how
 * soon a row is processed; so a wake-up that fails is logged and counted, never thrown.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { ConsumerDeclaration } from '../framework/types';
import { countDueLanes } from '../inbox/count-due-lanes';
import { workerPause } from '../inbox/consumer-pause';
import {
  dropInvitation,
  ensureSlots,
  leaveSlot,
  renewSlot,
  reserveInvitations,
  takeFreeSlot,
  takeInvitedSlot,
  type LeaveMode,
} from '../inbox/worker-slot';
import { DEFAULTS, type Config } from '../lib/config';
import type { Sql } from '../lib/db';
import { classifyError } from '../lib/errors';
import { MetricNames } from '../lib/metric-names';
import { count } from '../lib/observability';
import { newOwnerId, runWorker, type BatchStats, type StopReason, type WorkerResult } from './run-worker';
import { INVITATION_GRACE_SECONDS, isInvited, readWorkerEvent, sendWakeUp, type InvitedEvent, type WorkerTarget } from '../lib/wake-up';

/**
 * A slot's hold, renewed every third of it while the worker is awake: a worker that died
 * keeps its slot (and the ingest's gate closed) this long at most.
 */
export const SLOT_HOLD_SECONDS = 15;
const RENEW_EVERY_MS = (SLOT_HOLD_SECONDS * 1000) / 3;

/** A worker weighs fanning out at most this often: the backlog count is cheap, not free. */
const FAN_OUT_CHECK_MS = 1_000;

/** The most due lanes one backlog count reads. */
const MAX_BACKLOG_COUNT = 100_000;

export interface InvocationDependencies {
  sql: Sql;
  consumer: ConsumerDeclaration;
  config: { worker: Config['worker']; wakeUps: Pick<Config['wakeUps'], 'enabled'> };
  logger: Logger;
  metrics: Metrics;
  /** This worker function, which it invokes to fan out and hand over; absent: it invokes nothing. */
  self?: WorkerTarget;
  random?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface InvocationContext {
  awsRequestId: string;
  getRemainingTimeInMillis(): number;
}

export interface InvocationResult extends Omit<WorkerResult, 'stoppedBy'> {
  /** 'no-slot': every slot was held, so this invocation did nothing; 'paused': see StopReason. */
  stoppedBy: StopReason | 'no-slot';
  /** The slot it drained in. */
  slot: number | null;
  /** Workers it invoked to share its backlog. */
  fannedOut: number;
  /** Whether it invoked a successor when its budget ran out with work due. */
  handedOver: boolean;
}

const NOTHING: Omit<InvocationResult, 'stoppedBy' | 'slot'> = {
  claimed: 0,
  processed: 0,
  retried: 0,
  quarantined: 0,
  ignored: 0,
  released: 0,
  lost: 0,
  fannedOut: 0,
  handedOver: false,
};

/** The worker's invocation handler (handler.ts, the local run), slots prepared once per process. */
export function createWorkerInvocation(deps: InvocationDependencies) {
  const { sql, consumer, logger, metrics } = deps;
  const { worker } = deps.config;
  const maxSlots = worker.maxConcurrency ?? DEFAULTS.workerMaxConcurrency;
  const drainSeconds = worker.fanOutDrainSeconds ?? DEFAULTS.workerFanOutDrainSeconds;
  const self = deps.config.wakeUps.enabled ? deps.self : undefined;
  let slotsReady = false;

  return async function invoke(rawEvent: unknown, context: InvocationContext): Promise<InvocationResult> {
    const { event, unexpected } = readWorkerEvent(rawEvent, consumer.name);
    if (unexpected) logger.warn('worker_event_unexpected', { consumerName: consumer.name, note: 'run as a scheduled invocation' });
    // The request id names the invocation; the suffix keeps it unique when Lambda delivers
    // an asynchronous invocation again under the same request id.
    const owner = newOwnerId(`worker:${context.awsRequestId}`);
    const remainingMs = () => context.getRemainingTimeInMillis();
    const holdSeconds = () => Math.max(0.001, Math.min(SLOT_HOLD_SECONDS, remainingMs() / 1000));

    const pause = await workerPause(sql, consumer.name);
    if (pause !== null) {
      if (isInvited(event)) {
        await dropInvitation(sql, { consumerName: consumer.name, slotNo: event.slot, invitation: event.invitation });
      }
      logger.info('worker_paused', {
        consumerName: consumer.name,
        source: event.source,
        pausedBy: pause.paused_by,
        pausedAt: pause.paused_at,
      });
      return { ...NOTHING, stoppedBy: 'paused', slot: null };
    }
    if (!slotsReady) {
      await ensureSlots(sql, consumer.name, maxSlots);
      slotsReady = true;
    }
    let slotNo: number | null = null;
    if (isInvited(event)) {
      const invited = { consumerName: consumer.name, slotNo: event.slot, invitation: event.invitation, owner, holdSeconds: holdSeconds() };
      if (await takeInvitedSlot(sql, invited)) slotNo = event.slot;
    }
    slotNo ??= await takeFreeSlot(sql, { consumerName: consumer.name, maxSlots, owner, seconds: holdSeconds() });
    if (slotNo === null) {
      logger.info('worker_not_needed', { consumerName: consumer.name, source: event.source, maxConcurrency: maxSlots });
      return { ...NOTHING, stoppedBy: 'no-slot', slot: null };
    }
    const slot = { consumerName: consumer.name, slotNo, owner };
    let holding = true;
    let renewedAt = performance.now();
    let fanOutCheckedAt = -Infinity;
    let fannedOut = 0;
    let handedOver = false;

    const leave = async (mode: LeaveMode, invitation?: string) => {
      const outcome = await leaveSlot(sql, {
        ...slot,
        mode,
        ...(invitation ? { invitation, graceSeconds: INVITATION_GRACE_SECONDS } : {}),
      });
      if (outcome !== 'stayed') holding = false;
      return outcome;
    };

    const wake = async (invitations: readonly { slotNo: number; invitation: string }[], source: InvitedEvent['source']) => {
      const sent = await Promise.all(
        invitations.map((i) =>
          sendWakeUp(self!, { source, consumerName: consumer.name, slot: i.slotNo, invitation: i.invitation }, { logger, metrics }),
        ),
      );
      return sent.filter(Boolean).length;
    };

    /**
     * Fan out when the backlog would take this worker alone longer than the horizon (the
     * configured drain time, or what is left of its budget if less) to drain, at the rate it
     * has drained lanes so far: as many workers in all as that takes, up to the slots.
     */
    const fanOut = async (batch: BatchStats) => {
      if (self === undefined || maxSlots <= 1 || !batch.full || batch.busyMs <= 0) return;
      if (performance.now() - fanOutCheckedAt < FAN_OUT_CHECK_MS) return;
      fanOutCheckedAt = performance.now();
      const horizonSeconds = Math.min(drainSeconds, (remainingMs() - worker.safetyMarginMs) / 1000);
      if (horizonSeconds <= 0) return;
      const perWorker = Math.max(1, (batch.totalLanes / batch.busyMs) * 1000 * horizonSeconds);
      try {
        const backlog = await countDueLanes(sql, consumer.name, Math.min(MAX_BACKLOG_COUNT, Math.ceil(perWorker * maxSlots)));
        const wanted = Math.min(maxSlots, Math.ceil(backlog / perWorker));
        if (wanted <= 1) return;
        const invitations = await reserveInvitations(sql, {
          consumerName: consumer.name,
          maxSlots,
          wanted,
          prefix: `fan-out:${owner}`,
          seconds: INVITATION_GRACE_SECONDS,
        });
        if (invitations.length === 0) return;
        fannedOut += await wake(invitations, 'fan-out');
        logger.info('worker_fanned_out', { consumerName: consumer.name, dueLanes: backlog, wanted, invited: invitations.length });
      } catch (error) {
        const c = classifyError(error);
        count(metrics, MetricNames.WakeUpFailures, 1);
        logger.warn('wake_up_failed', {
          consumerName: consumer.name,
          source: 'fan-out',
          stage: 'gate',
          errorCode: c.code,
          sqlState: c.sqlState,
        });
      }
    };

    try {
      const result = await runWorker({
        sql,
        consumer,
        config: deps.config,
        logger,
        metrics,
        owner,
        remainingMs,
        ...(deps.random ? { random: deps.random } : {}),
        awake: {
          idleMs: worker.idleMs ?? 0,
          pollMs: worker.pollMs ?? DEFAULTS.workerPollMs,
          ...(deps.sleep ? { sleep: deps.sleep } : {}),
          beforeClaim: async () => {
            if (performance.now() - renewedAt < RENEW_EVERY_MS) return true;
            renewedAt = performance.now();
            holding = await renewSlot(sql, { ...slot, holdSeconds: holdSeconds() });
            if (!holding) logger.warn('worker_slot_lost', { consumerName: consumer.name, slot: slotNo });
            return holding;
          },
          afterBatch: fanOut,
          // Free the slot only with nothing due, in one statement: rows an ingest batch
          // stored while it saw this worker awake are claimed before it goes.
          mayStop: async () => (await leave('stay')) !== 'stayed',
        },
      });
      if (holding && result.stoppedBy === 'budget' && self !== undefined) {
        const invitation = `hand-over:${owner}`;
        if ((await leave('hand-over', invitation)) === 'handed-over') {
          handedOver = (await wake([{ slotNo, invitation }], 'hand-over')) === 1;
        }
      }
      if (holding) await leave('leave');
      return { ...result, slot: slotNo, fannedOut, handedOver };
    } finally {
      if (holding) {
        // The invocation failed: free the slot now rather than when its hold lapses, if the
        // database still answers.
        await leave('leave').catch((error: unknown) =>
          logger.warn('worker_slot_not_freed', { consumerName: consumer.name, slot: slotNo, errorCode: classifyError(error).code }),
        );
      }
    }
  };
}
