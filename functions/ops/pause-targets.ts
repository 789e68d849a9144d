/**
 * What pause and resume switch, and where they record it.
 *
 *   the database       the pause of the consumer's processing (migration 0100): what every
 *                      worker invocation, the claim and the ingest's wake-up gate obey,
 *                      whoever invoked the worker. Written with the audit row, in one
 *                      transaction.
 *   Scheduler          the worker schedule, disabled (no invocation at all is cheaper than
 *                      one that finds the pause) and enabled again.
 *   Lambda             with --ingest, the consumer's event-source mappings.
 *
 * Which schedule, worker and mappings are the consumer's: its entry in the consumer
 * directory says (./consumer-directory.ts).
 * Finding them and switching them is pause-switches.ts; this module orders the calls and
 * the database write, and says what holds.
 *
 * Neither AWS API is transactional with the database. The AWS calls come first: pausing
 * ingest is what an operator does when the database is in trouble, and it must work then.
 * The database transaction follows, recording what each call changed (and the error of a
 * call that failed). When one side failed, the command says what holds and fails
 * (PARTIALLY_APPLIED): for the workers the database decides, so a pause recorded there
 * holds even if the schedule could not be disabled, and a resume is not done until the
 * database says so. A resume then wakes a worker, so the rows that waited do not wait for
 * the next tick.
 */
import { z } from 'zod';
import { countInFlight, liftPause, recordPause, type PauseRow, type PauseTarget } from '../inbox/consumer-pause';
import { recordOperatorAction, type OperatorActionEntry } from './queries/operator-audit';
import { caller, flag, reasonText, text } from './args';
import { actorOf, knownConsumer, type Invocation, type OpsDeps } from './command';
import { OpsError, OpsErrorCodes } from './errors';
import { auditLine } from './format';
import {
  ingestMappingsOf,
  switchIngestMapping,
  switchWorkerSchedule,
  targetsOf,
  wakeAfterResume,
  type Action,
  type ConsumerTargets,
  type TargetChange,
} from './pause-switches';

export const pauseSchema = z.strictObject({
  ...caller,
  consumer: text,
  reason: reasonText.optional(),
  /** The worker schedule (the default when neither is named). */
  worker: flag,
  /** The ingest event-source mappings. */
  ingest: flag,
});
export type PauseArgs = z.output<typeof pauseSchema>;

/** A pause as the database holds it. */
export interface PauseView {
  target: PauseTarget;
  pausedBy: string;
  reason: string | null;
  since: Date;
}

export interface PauseResult {
  consumer: string;
  action: Action;
  /** What the AWS calls changed. */
  targets: TargetChange[];
  /**
   * What the database holds after the action: the consumer's pauses (none after a full
   * resume); null when the database could not be written (then the log carries the audit row).
   */
  paused: PauseView[] | null;
  /** Pause: rows claimed before the pause, still PROCESSING: they finish, nothing more is claimed. */
  inFlight?: number;
  /** Resume: whether a worker was woken at once (else the schedule starts one within a minute). */
  wakeUp?: 'sent' | 'failed';
  /** Null when the audit row could not be written (then the log carries it). */
  auditId: string | null;
}

export function pauseView(row: PauseRow): PauseView {
  return { target: row.target, pausedBy: row.paused_by, reason: row.reason, since: row.paused_at };
}

/** `worker paused by alice since 2026-…Z (INC-9)`: one line, for stats, event and pause. */
export function describePause(p: PauseView): string {
  return `${p.target} paused by ${p.pausedBy} since ${p.since.toISOString()}${p.reason !== null ? ` (${p.reason})` : ''}`;
}

/** What the database write of a pause or resume returned. */
interface Recorded {
  auditId: string;
  paused: PauseRow[];
  inFlight?: number;
}

/** The audit row and the pause rows, in one transaction. */
async function recordSwitch(
  deps: OpsDeps,
  entry: OperatorActionEntry,
  consumer: string,
  pauses: readonly PauseTarget[],
  lifts: readonly PauseTarget[],
): Promise<Recorded> {
  return deps.sql.begin(async (tx) => {
    const audit = await recordOperatorAction(tx, entry);
    if (pauses.length > 0) {
      await recordPause(tx, { consumerName: consumer, targets: pauses, by: entry.actor!, reason: entry.reason, auditId: audit.audit_id });
    }
    if (lifts.length > 0) await liftPause(tx, consumer, lifts);
    const paused = await tx<PauseRow[]>`select * from integration.consumer_pause where consumer_name = ${consumer} order by target`;
    return {
      auditId: audit.audit_id,
      paused: [...paused],
      ...(entry.action === 'pause' ? { inFlight: await countInFlight(tx, consumer) } : {}),
    };
  });
}

const describeError = (failure: unknown) => (failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure));

/** What a pause or resume switches: the worker (its schedule and pause), the ingest mappings, or both. */
interface Plan {
  consumer: string;
  action: Action;
  worker: boolean;
  mappings: string[];
  found: ConsumerTargets;
  actor: string;
}

/** What the AWS calls did: the targets switched, and the first call that failed. */
interface Switched {
  targets: TargetChange[];
  failure: unknown;
}

/** Pause or resume what `args` names, then record it (see the module comment). */
export async function switchConsumer(deps: OpsDeps, args: PauseArgs, inv: Invocation, action: Action): Promise<PauseResult> {
  const plan = await planSwitch(deps, args, inv, action);
  const switched = await switchAws(deps, plan);
  // The database decides for the workers: their pause is recorded (or lifted) whatever the
  // schedule call did. An ingest pause is recorded only when its mappings were all switched.
  const ingestSwitched = args.ingest && switched.failure === undefined;
  const databaseTargets: PauseTarget[] = [...(plan.worker ? (['worker'] as const) : []), ...(ingestSwitched ? (['ingest'] as const) : [])];
  const entry = auditEntry(plan, args, inv, switched, databaseTargets);
  const { recorded, databaseError } = await record(deps, plan, entry, databaseTargets);
  const workerPaused = recorded?.paused.some((p) => p.target === 'worker');
  const wakeUp =
    action === 'resume' && plan.worker && recorded !== undefined && !workerPaused
      ? await wakeAfterResume(deps, plan.consumer, plan.found)
      : undefined;
  const result: PauseResult = {
    consumer: plan.consumer,
    action,
    targets: switched.targets,
    paused: recorded?.paused.map(pauseView) ?? null,
    ...(recorded?.inFlight !== undefined ? { inFlight: recorded.inFlight } : {}),
    ...(wakeUp !== undefined ? { wakeUp } : {}),
    auditId: recorded?.auditId ?? null,
  };
  deps.logger?.info(`ops_${action}`, {
    consumer: plan.consumer,
    targets: switched.targets,
    actor: plan.actor,
    reason: args.reason,
    auditId: result.auditId,
    failed: switched.failure !== undefined,
  });
  throwIfPartial(plan, result, switched.failure, databaseError, { recorded: recorded !== undefined, workerPaused });
  return result;
}

/** The consumer's targets; configuration problems are found before anything is switched. */
async function planSwitch(deps: OpsDeps, args: PauseArgs, inv: Invocation, action: Action): Promise<Plan> {
  const consumer = knownConsumer(deps, args.consumer).name;
  const worker = args.worker || !args.ingest;
  const found = await targetsOf(deps, consumer);
  const mappings = args.ingest ? ingestMappingsOf(consumer, found) : [];
  return { consumer, action, worker, mappings, found, actor: actorOf(args, inv) };
}

/** The AWS calls, first (see the module comment): the worker schedule, then each mapping, until one fails. */
async function switchAws(deps: OpsDeps, plan: Plan): Promise<Switched> {
  const targets: TargetChange[] = [];
  try {
    if (plan.worker) targets.push(await switchWorkerSchedule(deps, plan.consumer, plan.found, plan.action));
    for (const uuid of plan.mappings) targets.push(await switchIngestMapping(deps, uuid, plan.action));
  } catch (error) {
    return { targets, failure: error };
  }
  return { targets, failure: undefined };
}

function auditEntry(plan: Plan, args: PauseArgs, inv: Invocation, switched: Switched, databaseTargets: PauseTarget[]): OperatorActionEntry {
  const { targets, failure } = switched;
  return {
    action: plan.action,
    actor: plan.actor,
    reason: args.reason ?? null,
    source: inv.source,
    requestId: inv.requestId ?? null,
    dryRun: false,
    consumerNames: [plan.consumer],
    request: { worker: plan.worker, ingest: args.ingest },
    affectedCount: targets.filter((t) => t.changed).length,
    outcome: { targets, database: databaseTargets, ...(failure !== undefined ? { error: describeError(failure) } : {}) },
  };
}

/** The database write; when it fails, the log carries the audit row instead. */
async function record(
  deps: OpsDeps,
  plan: Plan,
  entry: OperatorActionEntry,
  databaseTargets: PauseTarget[],
): Promise<{ recorded: Recorded | undefined; databaseError: unknown }> {
  try {
    const recorded = await recordSwitch(
      deps,
      entry,
      plan.consumer,
      plan.action === 'pause' ? databaseTargets : [],
      plan.action === 'resume' ? databaseTargets : [],
    );
    return { recorded, databaseError: undefined };
  } catch (error) {
    deps.logger?.error('ops_audit_unwritten', { ...entry, error: error instanceof Error ? error.name : 'unknown' });
    return { recorded: undefined, databaseError: error };
  }
}

/** When one side failed: what holds, in an OpsError (PARTIALLY_APPLIED, or the refusal's own code) carrying the result. */
function throwIfPartial(
  plan: Plan,
  result: PauseResult,
  failure: unknown,
  databaseError: unknown,
  state: { recorded: boolean; workerPaused: boolean | undefined },
): void {
  const { consumer, action, worker } = plan;
  const problems: string[] = [];
  if (failure !== undefined) problems.push(`an AWS call failed (${describeError(failure)})`);
  // Only the workers' pause lives in the database alone; an ingest pause holds in its mappings.
  if (databaseError !== undefined && worker) problems.push(`the database could not record it (${describeError(databaseError)})`);
  if (problems.length === 0) return;
  const holds =
    action === 'pause'
      ? state.workerPaused
        ? 'the consumer IS paused for its workers (the database decides)'
        : worker
          ? 'the consumer is NOT paused for its workers'
          : 'its ingest may be only partly paused'
      : state.recorded && !state.workerPaused
        ? 'the consumer is resumed for its workers (the database decides)'
        : 'the consumer is STILL paused for its workers';
  // A refusal of ours (a schedule or mapping that does not exist) keeps its code.
  const code = failure instanceof OpsError ? failure.code : OpsErrorCodes.PARTIALLY_APPLIED;
  throw new OpsError(code, `${consumer}: ${action} partly applied: ${problems.join('; ')}; ${holds}. Run ${action} again.`, { result });
}

export function formatPause(r: PauseResult): string {
  const lines = r.targets.map((t) => {
    const what = t.kind === 'worker-schedule' ? `worker schedule ${t.id}` : `ingest mapping ${t.id}`;
    return t.changed ? `${r.consumer}: ${what} ${t.previous} → ${t.state}` : `${r.consumer}: ${what} already ${t.state}; nothing changed`;
  });
  if (r.paused !== null) {
    if (r.paused.length === 0) lines.push(`${r.consumer}: not paused`);
    for (const p of r.paused) lines.push(`${r.consumer}: ${describePause(p)}`);
  }
  if (r.inFlight !== undefined && r.inFlight > 0)
    lines.push(`${r.inFlight} row(s) claimed before the pause finish; nothing more is claimed`);
  if (r.wakeUp === 'sent') lines.push('worker woken');
  else if (r.wakeUp !== undefined) lines.push(`worker not woken (${r.wakeUp}); the schedule starts one within a minute`);
  lines.push(auditLine(r.auditId));
  return lines.join('\n');
}
