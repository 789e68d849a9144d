/**
 * A worker invocation's hold on its slot (migration 0060) while it drains: renewed every
 * third of its hold, left at the end (freed, kept while work is due, or turned into an
 * invitation for a successor), and the wake-ups it sends to the workers it invites.
 */
import { performance } from 'node:perf_hooks';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { leaveSlot, renewSlot, type LeaveMode } from './worker-slot';
import type { Sql } from '../../lib/db';
import { INVITATION_GRACE_SECONDS, sendWakeUp, type InvitedEvent, type WorkerTarget } from './wake-up';

/**
 * A slot's hold, renewed every third of it while the worker is awake: a worker that died
 * keeps its slot (and the ingest's gate closed) this long at most.
 */
export const SLOT_HOLD_SECONDS = 15;
const RENEW_EVERY_MS = (SLOT_HOLD_SECONDS * 1000) / 3;

/** What a slot session works with: the consumer's database, and where it logs and counts. */
export interface SlotScope {
  sql: Sql;
  consumerName: string;
  logger: Logger;
  metrics: Metrics;
}

export interface SlotSession {
  scope: SlotScope;
  slotNo: number;
  owner: string;
  /** The hold a renewal asks for: SLOT_HOLD_SECONDS, or what is left of the invocation if less. */
  holdSeconds: () => number;
  /** False once the slot is left, or lost to a renewal that came too late. */
  holding: boolean;
  renewedAt: number;
}

export function openSession(scope: SlotScope, slotNo: number, owner: string, holdSeconds: () => number): SlotSession {
  return { scope, slotNo, owner, holdSeconds, holding: true, renewedAt: performance.now() };
}

/** Leave the slot as `mode` says; the session stops holding it unless it stayed. */
export async function leave(session: SlotSession, mode: LeaveMode, invitation?: string) {
  const { sql, consumerName } = session.scope;
  const outcome = await leaveSlot(sql, {
    consumerName,
    slotNo: session.slotNo,
    owner: session.owner,
    mode,
    ...(invitation ? { invitation, graceSeconds: INVITATION_GRACE_SECONDS } : {}),
  });
  if (outcome !== 'stayed') session.holding = false;
  return outcome;
}

/** Before every claim: renew the hold when a third of it has passed. False: the slot is lost, stop. */
export async function renewIfDue(session: SlotSession): Promise<boolean> {
  if (performance.now() - session.renewedAt < RENEW_EVERY_MS) return true;
  const { sql, consumerName, logger } = session.scope;
  session.renewedAt = performance.now();
  session.holding = await renewSlot(sql, {
    consumerName,
    slotNo: session.slotNo,
    owner: session.owner,
    holdSeconds: session.holdSeconds(),
  });
  if (!session.holding) logger.warn('worker_slot_lost', { consumerName, slot: session.slotNo });
  return session.holding;
}

/** Invoke `self` once per invitation; resolves to the number sent. */
export async function wakeInvited(
  scope: SlotScope,
  self: WorkerTarget,
  invitations: readonly { slotNo: number; invitation: string }[],
  source: InvitedEvent['source'],
): Promise<number> {
  const { consumerName, logger, metrics } = scope;
  const sent = await Promise.all(
    invitations.map((i) => sendWakeUp(self, { source, consumerName, slot: i.slotNo, invitation: i.invitation }, { logger, metrics })),
  );
  return sent.filter(Boolean).length;
}
