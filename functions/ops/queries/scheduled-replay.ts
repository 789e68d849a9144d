/**
 * Scheduled replays (integration.scheduled_replay, migration 0100): ops schedule-replay
 * records one with the one-time schedule that fires it; the schedule's input names only
 * its id, and runScheduledReplay runs it at most once.
 *
 * At most once: the row is locked and marked ran in the replay's own transaction, with the
 * rows it moved and its audit row. An invocation that Lambda or Scheduler delivers twice
 * waits for the first one's lock, then finds the row ran and is refused; one that names an
 * unknown replay, or a replay not yet due, is refused too. Nothing in the event widens the
 * replay: what it replays, for whom and why is the row's.
 */
import { z } from 'zod';
import type { Queryable, Sql, TransactionSql } from '../../lib/db';
import { recordOperatorAction, type ActionSource } from './operator-audit';
import { countErrorCodes, moveQuarantinedIn, type QuarantinedCandidate, type QuarantineSelection } from './quarantine-action';
import { replaySet } from './replay';

/**
 * How early a replay may run before its time: EventBridge Scheduler fires at the minute it
 * was given (FlexibleTimeWindow OFF), and the database's clock may be a little behind AWS's.
 */
export const EARLY_TOLERANCE_SECONDS = 60;

export interface ScheduledReplayRow {
  replay_id: string;
  schedule_name: string;
  run_at: Date;
  selection: QuarantineSelection;
  row_limit: number;
  actor: string;
  reason: string;
  created_at: Date;
  created_audit_id: string;
  ran_at: Date | null;
  ran_request_id: string | null;
  ran_audit_id: string | null;
}

/** The stored selection, read back as ops replay takes it. */
const selectionSchema: z.ZodType<QuarantineSelection> = z.union([
  z.strictObject({ inboxIds: z.array(z.uuid()).min(1) }),
  z.strictObject({
    consumerName: z.string().min(1),
    errorCode: z.string().optional(),
    eventType: z.string().optional(),
    quarantinedFrom: z.string().optional(),
    quarantinedTo: z.string().optional(),
  }),
]);

export interface NewScheduledReplay {
  replayId: string;
  scheduleName: string;
  runAt: Date;
  selection: QuarantineSelection;
  limit: number;
  actor: string;
  reason: string;
  createdAuditId: string;
}

export async function createScheduledReplay(q: Queryable, r: NewScheduledReplay): Promise<ScheduledReplayRow> {
  const [row] = await q<ScheduledReplayRow[]>`
    insert into integration.scheduled_replay
      (replay_id, schedule_name, run_at, selection, row_limit, actor, reason, created_audit_id)
    values (${r.replayId}, ${r.scheduleName}, ${r.runAt}, ${JSON.stringify(r.selection)}::text::jsonb, ${r.limit},
            ${r.actor}, ${r.reason}, ${r.createdAuditId})
    returning *`;
  return row!;
}

export async function findScheduledReplay(q: Queryable, replayId: string): Promise<ScheduledReplayRow | null> {
  const [row] = await q<ScheduledReplayRow[]>`select * from integration.scheduled_replay where replay_id = ${replayId}`;
  return row ?? null;
}

export type ScheduledReplayOutcome =
  | { ran: true; replay: ScheduledReplayRow; rows: QuarantinedCandidate[]; auditId: string }
  | { ran: false; reason: 'unknown' | 'already-ran' | 'not-yet-due'; replay: ScheduledReplayRow | null; auditId: string };

/**
 * Run the scheduled replay `replayId` if it is pending and due, in one transaction with its
 * audit row (source 'schedule', the scheduling operator as actor); else record the refusal
 * (source: the caller's) and change nothing.
 */
export async function runScheduledReplay(
  sql: Sql,
  run: { replayId: string; requestId: string | null; refusedSource: ActionSource },
): Promise<ScheduledReplayOutcome> {
  const ran = await sql.begin(async (tx) => {
    const [pending] = await tx<(ScheduledReplayRow & { due: boolean })[]>`
      select r.*, r.run_at <= now() + make_interval(secs => ${EARLY_TOLERANCE_SECONDS}) as due
      from integration.scheduled_replay r
      where r.replay_id = ${run.replayId} and r.ran_at is null
      for update`;
    if (pending === undefined || !pending.due) return null;
    const { due: _due, ...replay } = pending;
    return replayNow(tx, replay, run.requestId);
  });
  if (ran !== null) return ran;

  const replay = await findScheduledReplay(sql, run.replayId);
  const reason = replay === null ? 'unknown' : replay.ran_at !== null ? 'already-ran' : 'not-yet-due';
  const audit = await recordOperatorAction(sql, {
    action: 'scheduled-replay-refused',
    actor: replay?.actor ?? 'unknown',
    reason: replay?.reason ?? null,
    source: run.refusedSource,
    requestId: run.requestId,
    dryRun: false,
    consumerNames: replay !== null && 'consumerName' in replay.selection ? [replay.selection.consumerName] : [],
    request: { replayId: run.replayId },
    affectedCount: 0,
    outcome: { refused: reason, ...(replay?.ran_at ? { ranAt: replay.ran_at, ranAuditId: replay.ran_audit_id } : {}) },
  });
  return { ran: false, reason, replay, auditId: audit.audit_id };
}

async function replayNow(tx: TransactionSql, replay: ScheduledReplayRow, requestId: string | null): Promise<ScheduledReplayOutcome> {
  const selection = selectionSchema.parse(replay.selection);
  const request = {
    selection,
    limit: replay.row_limit,
    actor: replay.actor,
    reason: replay.reason,
    source: 'schedule' as const,
    requestId,
    scheduledReplayId: replay.replay_id,
  };
  const moved = await moveQuarantinedIn(tx, 'replay', request, replaySet);
  // A replay that found nothing left to replay still ran: its trail says so.
  const audit =
    moved.audit ??
    (await recordOperatorAction(tx, {
      action: 'replay',
      actor: replay.actor,
      reason: replay.reason,
      source: 'schedule',
      requestId,
      dryRun: false,
      consumerNames: 'consumerName' in selection ? [selection.consumerName] : [],
      request: { selection, limit: replay.row_limit, scheduledReplayId: replay.replay_id },
      affectedCount: 0,
      outcome: { priorErrorCodes: countErrorCodes([]) },
    }));
  const [marked] = await tx<ScheduledReplayRow[]>`
    update integration.scheduled_replay
    set ran_at = now(), ran_request_id = ${requestId}, ran_audit_id = ${audit.audit_id}
    where replay_id = ${replay.replay_id} and ran_at is null
    returning *`;
  return { ran: true, replay: marked!, rows: moved.rows, auditId: audit.audit_id };
}
