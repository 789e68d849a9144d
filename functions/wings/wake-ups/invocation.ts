/**
 * One worker invocation, whoever invoked it: the schedule (every minute, the safety net),
 * the ingest function that stored rows and found nobody awake, or another worker (fanning
 * out, or handing over at the end of its budget). What the Lambda handler runs, and what
 * the local run's simulated Lambda runs.
 *
 *   paused? due?        a plain invocation (the schedule's, ops resume's) asks both in one
 *                       statement (worker-gate.ts): paused, or nothing due, it returns at
 *                       once, holding no slot; an invited one checks the pause only
 *   paused              the consumer's processing is paused (ops pause): free the slot an
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
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { ConsumerDeclaration } from '../../framework/types';
import { workerPause, type PauseRow } from '../../inbox/consumer-pause';
import { workerGate } from './worker-gate';
import { dropInvitation, ensureSlots, takeFreeSlot, takeInvitedSlot } from './worker-slot';
import { DEFAULTS, type Config } from '../../lib/config';
import type { Sql } from '../../lib/db';
import { classifyError } from '../../lib/errors';
import { tracer } from '../../lib/tracing';
import { isInvited, readWorkerEvent, type WorkerEvent, type WorkerTarget } from './wake-up';
import { fanOut, type FanOutPolicy, type FanOutState } from './fan-out';
import { newOwnerId, NO_WORK, runWorker, type StopReason, type WorkerResult } from '../../worker/run-worker';
import { leave, openSession, renewIfDue, SLOT_HOLD_SECONDS, wakeInvited, type SlotScope, type SlotSession } from './slot-session';

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
  /**
   * 'nothing-due': a plain invocation found no lane due and returned at once; 'no-slot':
   * every slot was held, so this invocation did nothing; 'paused': see StopReason.
   */
  stoppedBy: StopReason | 'no-slot' | 'nothing-due';
  /** The slot it drained in. */
  slot: number | null;
  /** Workers it invoked to share its backlog. */
  fannedOut: number;
  /** Whether it invoked a successor when its budget ran out with work due. */
  handedOver: boolean;
}

const NOTHING: Omit<InvocationResult, 'stoppedBy' | 'slot'> = { ...NO_WORK, fannedOut: 0, handedOver: false };

/** What every invocation of the process works with, fixed when it starts. */
interface InvocationSetup {
  deps: InvocationDependencies;
  scope: SlotScope;
  maxSlots: number;
  drainSeconds: number;
  /** This worker function when wake-ups are on: the target of its fan-out and hand-over. */
  self: WorkerTarget | undefined;
  /** ensureSlots has run in this process. */
  slotsReady: boolean;
}

/** The worker's invocation handler (handler.ts, the local run), slots prepared once per process. */
export function createWorkerInvocation(deps: InvocationDependencies) {
  const { worker } = deps.config;
  const setup: InvocationSetup = {
    deps,
    scope: { sql: deps.sql, consumerName: deps.consumer.name, logger: deps.logger, metrics: deps.metrics },
    maxSlots: worker.maxConcurrency ?? DEFAULTS.workerMaxConcurrency,
    drainSeconds: worker.fanOutDrainSeconds ?? DEFAULTS.workerFanOutDrainSeconds,
    self: deps.config.wakeUps.enabled ? deps.self : undefined,
    slotsReady: false,
  };
  return (rawEvent: unknown, context: InvocationContext): Promise<InvocationResult> => invoke(setup, rawEvent, context);
}

/** One invocation: paused? take a slot, drain in it, leave it. */
async function invoke(setup: InvocationSetup, rawEvent: unknown, context: InvocationContext): Promise<InvocationResult> {
  const { sql, consumerName, logger } = setup.scope;
  const { event, unexpected } = readWorkerEvent(rawEvent, consumerName);
  if (unexpected) logger.warn('worker_event_unexpected', { consumerName, note: 'run as a scheduled invocation' });
  // The request id names the invocation; the suffix keeps it unique when Lambda delivers
  // an asynchronous invocation again under the same request id.
  const owner = newOwnerId(`worker:${context.awsRequestId}`);
  const remainingMs = () => context.getRemainingTimeInMillis();
  const holdSeconds = () => Math.max(0.001, Math.min(SLOT_HOLD_SECONDS, remainingMs() / 1000));

  if (!isInvited(event)) {
    // The schedule's safety net, every minute: one read decides whether there is anything to do.
    const gate = await workerGate(sql, consumerName);
    if (gate.pause !== null) return paused(setup, event, gate.pause);
    if (!gate.due) return { ...NOTHING, stoppedBy: 'nothing-due', slot: null };
  } else if (await stayPaused(setup, event)) {
    return { ...NOTHING, stoppedBy: 'paused', slot: null };
  }
  if (!setup.slotsReady) {
    await ensureSlots(sql, consumerName, setup.maxSlots);
    setup.slotsReady = true;
  }
  const slotNo = await takeSlot(setup, event, owner, holdSeconds);
  if (slotNo === null) {
    logger.info('worker_not_needed', { consumerName, source: event.source, maxConcurrency: setup.maxSlots });
    return { ...NOTHING, stoppedBy: 'no-slot', slot: null };
  }
  const session = openSession(setup.scope, slotNo, owner, holdSeconds);
  try {
    return await drainInSlot(setup, session, remainingMs);
  } finally {
    if (session.holding) {
      // The invocation failed: free the slot now rather than when its hold lapses, if the
      // database still answers.
      await leave(session, 'leave').catch((error: unknown) =>
        logger.warn('worker_slot_not_freed', { consumerName, slot: slotNo, errorCode: classifyError(error).code }),
      );
    }
  }
}

/** An invited worker's consumer is paused: free the slot its invitation reserved, log, and say so. */
async function stayPaused(setup: InvocationSetup, event: WorkerEvent): Promise<boolean> {
  const { sql, consumerName } = setup.scope;
  const pause = await workerPause(sql, consumerName);
  if (pause === null) return false;
  if (isInvited(event)) {
    await dropInvitation(sql, { consumerName, slotNo: event.slot, invitation: event.invitation });
  }
  paused(setup, event, pause);
  return true;
}

/** Log that the consumer is paused; the invocation's result. */
function paused(setup: InvocationSetup, event: WorkerEvent, pause: Pick<PauseRow, 'paused_by' | 'paused_at'>): InvocationResult {
  const { consumerName, logger } = setup.scope;
  logger.info('worker_paused', { consumerName, source: event.source, pausedBy: pause.paused_by, pausedAt: pause.paused_at });
  return { ...NOTHING, stoppedBy: 'paused', slot: null };
}

/** The slot an invitation reserved for this worker, else the lowest free one; null when none is free. */
async function takeSlot(setup: InvocationSetup, event: WorkerEvent, owner: string, holdSeconds: () => number): Promise<number | null> {
  const { sql, consumerName } = setup.scope;
  if (isInvited(event)) {
    const invited = { consumerName, slotNo: event.slot, invitation: event.invitation, owner, holdSeconds: holdSeconds() };
    if (await takeInvitedSlot(sql, invited)) return event.slot;
  }
  return takeFreeSlot(sql, { consumerName, maxSlots: setup.maxSlots, owner, seconds: holdSeconds() });
}

/** Drain awake in the slot (runWorker), fanning out on the way; then hand over or leave. */
async function drainInSlot(setup: InvocationSetup, session: SlotSession, remainingMs: () => number): Promise<InvocationResult> {
  const { deps, self } = setup;
  const { worker } = deps.config;
  const policy: FanOutPolicy = {
    self,
    maxSlots: setup.maxSlots,
    drainSeconds: setup.drainSeconds,
    safetyMarginMs: worker.safetyMarginMs,
    remainingMs,
  };
  const fanOuts: FanOutState = { checkedAt: -Infinity, fannedOut: 0 };
  // The invocation's span, the parent of its batches'; an invocation that drains nothing makes none.
  const span = tracer().startSpan(`worker ${deps.consumer.name}`, {
    attributes: { 'inbox.consumer': deps.consumer.name, 'inbox.slot': session.slotNo, 'faas.invocation_id': session.owner },
  });
  const result = await runWorker({
    sql: deps.sql,
    consumer: deps.consumer,
    config: deps.config,
    logger: deps.logger,
    metrics: deps.metrics,
    owner: session.owner,
    remainingMs,
    span,
    ...(deps.random ? { random: deps.random } : {}),
    awake: {
      idleMs: worker.idleMs ?? 0,
      pollMs: worker.pollMs ?? DEFAULTS.workerPollMs,
      ...(deps.sleep ? { sleep: deps.sleep } : {}),
      beforeClaim: () => renewIfDue(session),
      afterBatch: (batch) => fanOut(session, policy, fanOuts, batch),
      // Free the slot only with nothing due, in one statement: rows an ingest batch
      // stored while it saw this worker awake are claimed before it goes.
      mayStop: async () => (await leave(session, 'stay')) !== 'stayed',
    },
  })
    .then((r) => {
      span.setAttributes({ 'inbox.claimed': r.claimed, 'inbox.processed': r.processed, 'inbox.stopped_by': r.stoppedBy });
      return r;
    })
    .finally(() => span.end());
  let handedOver = false;
  if (session.holding && result.stoppedBy === 'budget' && self !== undefined) {
    const invitation = `hand-over:${session.owner}`;
    if ((await leave(session, 'hand-over', invitation)) === 'handed-over') {
      handedOver = (await wakeInvited(setup.scope, self, [{ slotNo: session.slotNo, invitation }], 'hand-over')) === 1;
    }
  }
  if (session.holding) await leave(session, 'leave');
  return { ...result, slot: session.slotNo, fannedOut: fanOuts.fannedOut, handedOver };
}
