/**
 * A consumer's pause (migration 0100): a row in integration.consumer_pause, written by ops
 * pause in the transaction of its audit row, deleted by ops resume.
 *
 * A 'worker' pause stops processing, however a worker was invoked: the statements that
 * decide to take work or start a worker — the claim, the fan-out's reservations, a
 * worker's hand-over or stay, the ingest's wake-up gate — each test `processingPaused`
 * themselves, so a pause committed between two statements of a worker takes effect at the
 * next one. Rows claimed before it finish (a batch in flight is not torn down); nothing is
 * claimed after it.
 */
import type { Queryable, TransactionSql } from '../lib/db';

export const PAUSE_TARGETS = ['worker', 'ingest'] as const;
export type PauseTarget = (typeof PAUSE_TARGETS)[number];

export interface PauseRow {
  consumer_name: string;
  target: PauseTarget;
  paused_by: string;
  reason: string | null;
  paused_at: Date;
  audit_id: string;
}

/**
 * True when the consumer's processing is paused: given a name, an uncorrelated subquery,
 * which PostgreSQL evaluates once per statement (an InitPlan), by primary key; given a
 * column (the gauges' per-consumer rows), a key probe per row.
 */
export function processingPaused(q: Queryable, consumerName: string | ReturnType<Queryable>) {
  return q`exists (select 1 from integration.consumer_pause cp where cp.consumer_name = ${consumerName} and cp.target = 'worker')`;
}

/** The consumer's processing pause, or null. */
export async function workerPause(q: Queryable, consumerName: string): Promise<PauseRow | null> {
  const [row] = await q<PauseRow[]>`
    select * from integration.consumer_pause
    where consumer_name = ${consumerName} and target = 'worker'`;
  return row ?? null;
}

/** Every pause, of the given consumers or of all. */
export async function listPauses(q: Queryable, consumerNames?: readonly string[]): Promise<PauseRow[]> {
  return q<PauseRow[]>`
    select * from integration.consumer_pause
    ${consumerNames !== undefined ? q`where consumer_name = any(${consumerNames as string[]}::text[])` : q``}
    order by consumer_name, target`;
}

/**
 * Record a pause (in the caller's transaction, with its audit row). A target already
 * paused keeps its row: who paused it first, why and since when. Returns each target's
 * row and whether this call wrote it.
 */
export async function recordPause(
  tx: TransactionSql,
  pause: { consumerName: string; targets: readonly PauseTarget[]; by: string; reason: string | null; auditId: string },
): Promise<(PauseRow & { created: boolean })[]> {
  const created = await tx<PauseRow[]>`
    insert into integration.consumer_pause (consumer_name, target, paused_by, reason, audit_id)
    select ${pause.consumerName}, t, ${pause.by}, ${pause.reason}, ${pause.auditId}
    from unnest(${pause.targets as PauseTarget[]}::text[]) as t
    on conflict (consumer_name, target) do nothing
    returning *`;
  const all = await listPauses(tx, [pause.consumerName]);
  const fresh = new Set(created.map((r) => r.target));
  return all.filter((r) => pause.targets.includes(r.target)).map((r) => ({ ...r, created: fresh.has(r.target) }));
}

/** Lift the pause of the given targets (in the caller's transaction); returns the rows removed. */
export async function liftPause(tx: TransactionSql, consumerName: string, targets: readonly PauseTarget[]): Promise<PauseRow[]> {
  return tx<PauseRow[]>`
    delete from integration.consumer_pause
    where consumer_name = ${consumerName} and target = any(${targets as PauseTarget[]}::text[])
    returning *`;
}

/** Rows of the consumer in flight (PROCESSING): claimed before a pause, they still finish. */
export async function countInFlight(q: Queryable, consumerName: string): Promise<number> {
  const [row] = await q<{ n: number }[]>`
    select count(*)::int as n from integration.consumer_inbox
    where consumer_name = ${consumerName} and status = 'PROCESSING'`;
  return row!.n;
}
