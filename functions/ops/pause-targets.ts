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
 * Which schedule, worker and mappings are the consumer's: the configuration's maps name
 * them locally; in AWS the consumer directory does (./consumer-directory.ts).
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
import {
  GetEventSourceMappingCommand,
  InvokeCommand,
  ResourceNotFoundException as MappingNotFound,
  UpdateEventSourceMappingCommand,
} from '@aws-sdk/client-lambda';
import {
  GetScheduleCommand,
  ResourceNotFoundException as ScheduleNotFound,
  UpdateScheduleCommand,
  type GetScheduleCommandOutput,
  type UpdateScheduleCommandInput,
} from '@aws-sdk/client-scheduler';
import { z } from 'zod';
import { countInFlight, liftPause, recordPause, type PauseRow, type PauseTarget } from '../inbox/consumer-pause';
import { recordOperatorAction, type OperatorActionEntry } from '../inbox/operator-audit';
import { caller, flag, reasonText, text } from './args';
import { actorOf, knownConsumer, type Invocation, type OpsDeps } from './command';
import { OpsError, OpsErrorCodes } from './errors';
import { readConsumerEntry } from './consumer-directory';
import { auditLine } from './format';

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

type Action = 'pause' | 'resume';

/** One thing switched: the worker schedule (`group/name`) or an ingest mapping (its UUID). */
export interface TargetChange {
  kind: 'worker-schedule' | 'ingest-mapping';
  id: string;
  /** Its state before (Scheduler: ENABLED/DISABLED; Lambda: Enabled, Disabled, Enabling, …). */
  previous: string;
  /** Its state after: what the update returned (an ESM moves through Disabling/Enabling). */
  state: string;
  changed: boolean;
}

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
  wakeUp?: 'sent' | 'failed' | 'not-configured';
  /** Null when the audit row could not be written (then the log carries it). */
  auditId: string | null;
}

/** Fields GetSchedule returns that UpdateSchedule does not take (read-only), plus the one we change. */
type NotCarried = 'Arn' | 'CreationDate' | 'LastModificationDate' | 'State' | '$metadata';
type Carried = Omit<GetScheduleCommandOutput, NotCarried>;
// A compile-time guard: should the SDK add a field to GetSchedule's output that
// UpdateSchedule does not accept, this line stops compiling until someone decides.
const everyCarriedFieldIsUpdatable: Exclude<keyof Carried, keyof UpdateScheduleCommandInput> extends never ? true : never = true;
void everyCarriedFieldIsUpdatable;

/**
 * UpdateSchedule replaces the whole schedule: an omitted field is reset, not kept. So the
 * input is everything GetSchedule returned (target, input, retry policy, DLQ, window,
 * timezone, dates, KMS key, description, action after completion…), with State changed.
 */
export function updateInputFrom(current: GetScheduleCommandOutput, state: 'ENABLED' | 'DISABLED'): UpdateScheduleCommandInput {
  const { Arn: _arn, CreationDate: _created, LastModificationDate: _modified, State: _state, $metadata: _meta, ...carried } = current;
  const { Name, ScheduleExpression, Target, FlexibleTimeWindow } = carried;
  if (Name === undefined || ScheduleExpression === undefined || Target === undefined || FlexibleTimeWindow === undefined) {
    throw new Error('GetSchedule returned a schedule without Name, ScheduleExpression, Target or FlexibleTimeWindow');
  }
  return { ...carried, Name, ScheduleExpression, Target, FlexibleTimeWindow, State: state };
}

/**
 * What the configuration's maps name for a consumer (the local run, tests), else its entry
 * in the consumer directory (AWS: SSM, written by the consumer's stack), read once per command.
 */
interface ConsumerTargets {
  workerSchedule: string | undefined;
  workerFunction: string | undefined;
  ingestMappings: string[];
  /** Where these came from, for the messages. */
  source: string;
}

async function targetsOf(deps: OpsDeps, consumer: string): Promise<ConsumerTargets> {
  const { scheduler, ingestMappings, workerFunctions, consumerDirectory } = deps.config;
  const explicit =
    scheduler.workerSchedules[consumer] !== undefined || ingestMappings[consumer] !== undefined || workerFunctions[consumer] !== undefined;
  if (explicit || consumerDirectory === undefined || deps.ssm === undefined) {
    return {
      workerSchedule: scheduler.workerSchedules[consumer],
      workerFunction: workerFunctions[consumer],
      ingestMappings: ingestMappings[consumer] ?? [],
      source: 'WORKER_SCHEDULES / INGEST_MAPPINGS',
    };
  }
  const entry = await readConsumerEntry(deps.ssm, consumerDirectory, consumer);
  return { ...entry, source: `the consumer directory (${consumerDirectory}${consumer})` };
}

function workerScheduleOf(deps: OpsDeps, consumer: string, targets: ConsumerTargets): { name: string; groupName: string | undefined } {
  const name = targets.workerSchedule;
  if (name === undefined) {
    const configured = Object.keys(deps.config.scheduler.workerSchedules);
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `consumer "${consumer}" has no worker schedule in WORKER_SCHEDULES (configured: ${configured.join(', ') || 'none'})`,
    );
  }
  return { name, groupName: deps.config.scheduler.groupName };
}

function ingestMappingsOf(deps: OpsDeps, consumer: string, targets: ConsumerTargets): string[] {
  const uuids = targets.ingestMappings;
  if (uuids.length === 0) {
    const configured = Object.keys(deps.config.ingestMappings);
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `consumer "${consumer}" has no ingest mappings in ${targets.source === 'WORKER_SCHEDULES / INGEST_MAPPINGS' ? `INGEST_MAPPINGS (configured: ${configured.join(', ') || 'none'})` : targets.source}`,
    );
  }
  return uuids;
}

async function switchWorkerSchedule(deps: OpsDeps, consumer: string, targets: ConsumerTargets, action: Action): Promise<TargetChange> {
  const ref = workerScheduleOf(deps, consumer, targets);
  const id = `${ref.groupName ?? 'default'}/${ref.name}`;
  const wanted = action === 'pause' ? 'DISABLED' : 'ENABLED';
  let current: GetScheduleCommandOutput;
  try {
    current = await deps.scheduler.send(
      new GetScheduleCommand({ Name: ref.name, ...(ref.groupName !== undefined ? { GroupName: ref.groupName } : {}) }),
    );
  } catch (error) {
    if (error instanceof ScheduleNotFound) throw new OpsError(OpsErrorCodes.NOT_FOUND, `schedule ${id} does not exist`);
    throw error;
  }
  const previous = current.State ?? 'ENABLED';
  // Already in the wanted state: no write, so a repeated pause cannot race a resume.
  if (previous === wanted) return { kind: 'worker-schedule', id, previous, state: previous, changed: false };
  await deps.scheduler.send(new UpdateScheduleCommand(updateInputFrom(current, wanted)));
  return { kind: 'worker-schedule', id, previous, state: wanted, changed: true };
}

export function pauseView(row: PauseRow): PauseView {
  return { target: row.target, pausedBy: row.paused_by, reason: row.reason, since: row.paused_at };
}

/** `worker paused by alice since 2026-…Z (INC-9)`: one line, for stats, event and pause. */
export function describePause(p: PauseView): string {
  return `${p.target} paused by ${p.pausedBy} since ${p.since.toISOString()}${p.reason !== null ? ` (${p.reason})` : ''}`;
}

/**
 * UpdateEventSourceMapping changes only the fields it is given (unlike UpdateSchedule), so
 * Enabled alone is sent. A mapping already on its way (Disabling for a pause) is left alone.
 */
async function switchIngestMapping(deps: OpsDeps, uuid: string, action: Action): Promise<TargetChange> {
  const done = action === 'pause' ? ['Disabled', 'Disabling'] : ['Enabled', 'Enabling'];
  let previous: string;
  try {
    previous = (await deps.lambda.send(new GetEventSourceMappingCommand({ UUID: uuid }))).State ?? 'unknown';
  } catch (error) {
    if (error instanceof MappingNotFound) throw new OpsError(OpsErrorCodes.NOT_FOUND, `event-source mapping ${uuid} does not exist`);
    throw error;
  }
  if (done.includes(previous)) return { kind: 'ingest-mapping', id: uuid, previous, state: previous, changed: false };
  const updated = await deps.lambda.send(new UpdateEventSourceMappingCommand({ UUID: uuid, Enabled: action === 'resume' }));
  return { kind: 'ingest-mapping', id: uuid, previous, state: updated.State ?? 'unknown', changed: true };
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

/** Invoke the consumer's worker once (asynchronously), so that what waited is processed now. */
async function wakeAfterResume(deps: OpsDeps, consumer: string, targets: ConsumerTargets): Promise<'sent' | 'failed' | 'not-configured'> {
  const functionName = targets.workerFunction;
  if (functionName === undefined) return 'not-configured';
  try {
    await deps.lambda.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: 'Event',
        Payload: Buffer.from(JSON.stringify({ source: 'resume' })),
      }),
    );
    return 'sent';
  } catch (error) {
    deps.logger?.error('ops_resume_wake_up_failed', { consumer, error: error instanceof Error ? error.name : 'unknown' });
    return 'failed';
  }
}

const describeError = (failure: unknown) => (failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure));

/** Pause or resume what `args` names, then record it (see the module comment). */
export async function switchConsumer(deps: OpsDeps, args: PauseArgs, inv: Invocation, action: Action): Promise<PauseResult> {
  const consumer = knownConsumer(deps, args.consumer).name;
  const worker = args.worker || !args.ingest;
  // Configuration problems are found before anything is switched.
  const found = await targetsOf(deps, consumer);
  if (worker) workerScheduleOf(deps, consumer, found);
  const mappings = args.ingest ? ingestMappingsOf(deps, consumer, found) : [];
  const actor = actorOf(args, inv);

  const targets: TargetChange[] = [];
  let failure: unknown;
  try {
    if (worker) targets.push(await switchWorkerSchedule(deps, consumer, found, action));
    for (const uuid of mappings) targets.push(await switchIngestMapping(deps, uuid, action));
  } catch (error) {
    failure = error;
  }
  // The database decides for the workers: their pause is recorded (or lifted) whatever the
  // schedule call did. An ingest pause is recorded only when its mappings were all switched.
  const ingestSwitched = args.ingest && failure === undefined;
  const databaseTargets: PauseTarget[] = [...(worker ? (['worker'] as const) : []), ...(ingestSwitched ? (['ingest'] as const) : [])];
  const entry: OperatorActionEntry = {
    action,
    actor,
    reason: args.reason ?? null,
    source: inv.source,
    requestId: inv.requestId ?? null,
    dryRun: false,
    consumerNames: [consumer],
    request: { worker, ingest: args.ingest },
    affectedCount: targets.filter((t) => t.changed).length,
    outcome: { targets, database: databaseTargets, ...(failure !== undefined ? { error: describeError(failure) } : {}) },
  };
  let recorded: Recorded | undefined;
  let databaseError: unknown;
  try {
    recorded = await recordSwitch(
      deps,
      entry,
      consumer,
      action === 'pause' ? databaseTargets : [],
      action === 'resume' ? databaseTargets : [],
    );
  } catch (error) {
    databaseError = error;
    deps.logger?.error('ops_audit_unwritten', { ...entry, error: error instanceof Error ? error.name : 'unknown' });
  }
  const workerPaused = recorded?.paused.some((p) => p.target === 'worker');
  const wakeUp =
    action === 'resume' && worker && recorded !== undefined && !workerPaused ? await wakeAfterResume(deps, consumer, found) : undefined;
  const result: PauseResult = {
    consumer,
    action,
    targets,
    paused: recorded?.paused.map(pauseView) ?? null,
    ...(recorded?.inFlight !== undefined ? { inFlight: recorded.inFlight } : {}),
    ...(wakeUp !== undefined ? { wakeUp } : {}),
    auditId: recorded?.auditId ?? null,
  };
  deps.logger?.info(`ops_${action}`, {
    consumer,
    targets,
    actor,
    reason: args.reason,
    auditId: result.auditId,
    failed: failure !== undefined,
  });

  const problems: string[] = [];
  if (failure !== undefined) problems.push(`an AWS call failed (${describeError(failure)})`);
  // Only the workers' pause lives in the database alone; an ingest pause holds in its mappings.
  if (databaseError !== undefined && worker) problems.push(`the database could not record it (${describeError(databaseError)})`);
  if (problems.length > 0) {
    const holds =
      action === 'pause'
        ? workerPaused
          ? 'the consumer IS paused for its workers (the database decides)'
          : worker
            ? 'the consumer is NOT paused for its workers'
            : 'its ingest may be only partly paused'
        : recorded !== undefined && !workerPaused
          ? 'the consumer is resumed for its workers (the database decides)'
          : 'the consumer is STILL paused for its workers';
    // A refusal of ours (a schedule or mapping that does not exist) keeps its code.
    const code = failure instanceof OpsError ? failure.code : OpsErrorCodes.PARTIALLY_APPLIED;
    throw new OpsError(code, `${consumer}: ${action} partly applied: ${problems.join('; ')}; ${holds}. Run ${action} again.`, { result });
  }
  return result;
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
