/**
 * The local run's pause drill: an operator pauses one deferred consumer mid-run with the
 * real ops command, holds it for a few seconds while its records keep arriving, and
 * resumes it; the drill's check says that nothing of that consumer was processed while it
 * was paused and that everything it held was processed after.
 *
 *   pause      `ops pause` (the database pause, the simulated schedule disabled), once a
 *              quarter of the consumer's records have been delivered; from then until the
 *              settle the consumer's mappings start no delivery, so that records are left
 *              to arrive while it is paused however fast the run has gone so far
 *   settle     the batches claimed before the pause finish: the drill waits until none of
 *              the consumer's rows has been PROCESSING (crashed workers' rows aside) for a
 *              second — a claim that had begun before the pause committed has landed by then
 *   hold       `pauseMs`, the deliveries going on; whatever runs meanwhile (ingest
 *              wake-ups, hand-overs, the reaper, a worker invoked late) must process nothing
 *   resume     `ops resume` (the pause lifted, the schedule enabled, a worker woken)
 *
 * The check is read at the end of the run: rows processed between the settle and the
 * resume (none allowed), rows open at the resume (at least one, else the pause held
 * nothing and proved nothing), and that every one of those is final now.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../../functions/lib/db';
import type { OpsDeps } from '../../functions/ops/command';
import { runCommand } from '../../functions/ops/run';
import type { PauseResult } from '../../functions/ops/pause-targets';
import type { CheckResult } from './checks';

/** How long nothing may be in flight before the pause counts as settled. */
const QUIET_MS = 1_000;
/** Give up waiting for the settle after this long (the check then fails, saying so). */
const SETTLE_LIMIT_MS = 30_000;
const POLL_MS = 50;
/** The share of its records the consumer's mappings must have delivered before the pause. */
const START_AT = 0.25;
/** The owners of rows a planned crash abandons (run.ts): in flight until the reaper returns them. */
const CRASHED_OWNER = 'local-crashed-worker:%';

export interface PauseDrillOptions {
  consumer: string;
  pauseMs: number;
  /** The ops command's dependencies, as inbox_ops, with the simulated scheduler and Lambda. */
  ops: OpsDeps;
  /** The run's own client, for the drill's observations. */
  admin: Sql;
  /** The share of the consumer's records delivered so far (0–1). */
  delivered: () => number;
  /** Start no delivery of the consumer's records until releaseDeliveries(). */
  holdDeliveries: () => void;
  releaseDeliveries: () => void;
  /** False while the consumer's planned crash has not happened (it must find rows to abandon). */
  ready: () => boolean;
  isStopping: () => boolean;
}

export interface PauseDrillReport {
  consumer: string;
  /** The database's clock: paused, settled, resumed. */
  pausedAt: Date;
  settledAt: Date | null;
  resumedAt: Date;
  /** Rows claimed before the pause, still in flight when it was recorded. */
  inFlightAtPause: number;
  /** Rows processed between the settle and the resume: must be 0. */
  processedWhilePaused: number;
  /** Rows of the consumer open (RECEIVED, RETRY_PENDING) at the resume. */
  heldIds: string[];
  /** Rows received while it was paused. */
  receivedWhilePaused: number;
}

export class PauseDrill {
  report: PauseDrillReport | null = null;

  constructor(private readonly options: PauseDrillOptions) {}

  /** Wait for the moment, pause, hold, resume. Returns without a report when the run stops first. */
  async run(): Promise<void> {
    const { consumer, ops, admin, pauseMs } = this.options;
    const operator = { source: 'cli' as const, defaultActor: 'local-operator' };
    while (!(this.options.ready() && this.options.delivered() >= START_AT)) {
      if (this.options.isStopping()) return;
      await sleep(POLL_MS);
    }
    this.options.holdDeliveries();
    let paused: PauseResult;
    let pausedAt: Date;
    let settledAt: Date | null;
    try {
      paused = (await runCommand(ops, { command: 'pause', consumer, reason: 'local pause drill' }, operator)) as PauseResult;
      pausedAt = paused.paused?.find((p) => p.target === 'worker')?.since ?? (await this.now());
      settledAt = await this.settle();
    } finally {
      this.options.releaseDeliveries();
    }
    if (settledAt !== null) await sleep(pauseMs);
    const [window] = await admin<{ at: Date; processed: number; received: number }[]>`
      select now() as at,
             count(*) filter (where processed_at > ${settledAt ?? pausedAt})::int as processed,
             count(*) filter (where received_at > ${pausedAt})::int as received
      from integration.consumer_inbox
      where consumer_name = ${consumer}`;
    const held = await admin<{ inbox_id: string }[]>`
      select inbox_id::text from integration.consumer_inbox
      where consumer_name = ${consumer} and status in ('RECEIVED', 'RETRY_PENDING')`;
    await runCommand(ops, { command: 'resume', consumer, reason: 'local pause drill over' }, operator);
    this.report = {
      consumer,
      pausedAt,
      settledAt,
      resumedAt: window!.at,
      inFlightAtPause: paused.inFlight ?? 0,
      processedWhilePaused: settledAt === null ? -1 : window!.processed,
      heldIds: held.map((r) => r.inbox_id),
      receivedWhilePaused: window!.received,
    };
  }

  /** The check, read once the run has settled. */
  async check(): Promise<CheckResult> {
    const name = 'a paused consumer processes nothing until it is resumed';
    const r = this.report;
    if (r === null)
      return { name, ok: false, detail: 'the pause drill did not run (the run ended before a quarter of the records were delivered)' };
    const [after] = await this.options.admin<{ final: number; processed_after: number }[]>`
      select count(*) filter (where status in ('PROCESSED', 'IGNORED', 'QUARANTINED'))::int as final,
             count(*) filter (where processed_at > ${r.resumedAt})::int as processed_after
      from integration.consumer_inbox
      where inbox_id = any(${r.heldIds}::uuid[])`;
    const seconds = ((r.resumedAt.getTime() - (r.settledAt ?? r.pausedAt).getTime()) / 1000).toFixed(1);
    const problems = [
      ...(r.settledAt === null ? [`rows stayed in flight ${SETTLE_LIMIT_MS / 1000} s after the pause`] : []),
      ...(r.processedWhilePaused > 0 ? [`${r.processedWhilePaused} rows processed while ${r.consumer} was paused`] : []),
      ...(r.heldIds.length === 0 ? ['nothing was left to hold at the resume: the drill proved nothing'] : []),
      ...(after!.final < r.heldIds.length ? [`${r.heldIds.length - after!.final} of the ${r.heldIds.length} held rows are not final`] : []),
    ];
    const detail =
      `${r.consumer} paused for ${seconds} s after the ${r.inFlightAtPause} rows in flight finished: ${Math.max(0, r.processedWhilePaused)} processed meanwhile, ` +
      `${r.receivedWhilePaused} received; ${r.heldIds.length} held rows, every one final after the resume (${after!.processed_after} processed after it)`;
    return problems.length === 0 ? { name, ok: true, detail } : { name, ok: false, detail: problems.join('; ') };
  }

  /** The database's now() once nothing of the consumer has been in flight for QUIET_MS; null if that never came. */
  private async settle(): Promise<Date | null> {
    const { admin, consumer } = this.options;
    let quietSince: number | null = null;
    for (const started = Date.now(); Date.now() - started < SETTLE_LIMIT_MS; await sleep(POLL_MS)) {
      const [row] = await admin<{ n: number }[]>`
        select count(*)::int as n from integration.consumer_inbox
        where consumer_name = ${consumer} and status = 'PROCESSING' and locked_by not like ${CRASHED_OWNER}`;
      if (row!.n > 0) quietSince = null;
      else if (quietSince === null) quietSince = Date.now();
      else if (Date.now() - quietSince >= QUIET_MS) return this.now();
    }
    return null;
  }

  private async now(): Promise<Date> {
    const [row] = await this.options.admin<{ at: Date }[]>`select now() as at`;
    return row!.at;
  }
}
