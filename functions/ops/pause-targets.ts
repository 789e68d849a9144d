/**
 * What pause and resume switch: a consumer's worker schedule (EventBridge Scheduler) and,
 * with --ingest, its ingest event-source mappings (Lambda), and the audit row they leave.
 *
 * Neither API is transactional with the database, so the audit row is written after the
 * AWS calls, recording what each call changed — also when one of them failed midway (then
 * the error is recorded and thrown). The AWS calls come first on purpose: pausing ingest
 * is what an operator does when the database is in trouble, and it must work then. If the
 * audit row cannot be written, the result says so (`auditId: null`) and the same record
 * goes to the log as `ops_audit_unwritten`, so the trail is never silently lost.
 */
import {
  GetEventSourceMappingCommand,
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
import type { OperatorActionEntry } from '../inbox/operator-audit';
import { caller, flag, reasonText, text } from './args';
import { actorOf, knownConsumer, recordOrLog, type Invocation, type OpsDeps } from './command';
import { OpsError, OpsErrorCodes } from './errors';
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

export interface PauseResult {
  consumer: string;
  action: Action;
  targets: TargetChange[];
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
  const { Arn: _arn, CreationDate: _created, LastModificationDate: _modified, State: _state, $metadata: _meta, ...carried } =
    current;
  const { Name, ScheduleExpression, Target, FlexibleTimeWindow } = carried;
  if (Name === undefined || ScheduleExpression === undefined || Target === undefined || FlexibleTimeWindow === undefined) {
    throw new Error('GetSchedule returned a schedule without Name, ScheduleExpression, Target or FlexibleTimeWindow');
  }
  return { ...carried, Name, ScheduleExpression, Target, FlexibleTimeWindow, State: state };
}

function workerScheduleOf(deps: OpsDeps, consumer: string): { name: string; groupName: string | undefined } {
  const name = deps.config.scheduler.workerSchedules[consumer];
  if (name === undefined) {
    const configured = Object.keys(deps.config.scheduler.workerSchedules);
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `consumer "${consumer}" has no worker schedule in WORKER_SCHEDULES (configured: ${configured.join(', ') || 'none'})`,
    );
  }
  return { name, groupName: deps.config.scheduler.groupName };
}

function ingestMappingsOf(deps: OpsDeps, consumer: string): string[] {
  const uuids = deps.config.ingestMappings[consumer] ?? [];
  if (uuids.length === 0) {
    const configured = Object.keys(deps.config.ingestMappings);
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `consumer "${consumer}" has no ingest mappings in INGEST_MAPPINGS (configured: ${configured.join(', ') || 'none'})`,
    );
  }
  return uuids;
}

async function switchWorkerSchedule(deps: OpsDeps, consumer: string, action: Action): Promise<TargetChange> {
  const ref = workerScheduleOf(deps, consumer);
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

/** Pause or resume what `args` names, then record it (see the module comment). */
export async function switchConsumer(deps: OpsDeps, args: PauseArgs, inv: Invocation, action: Action): Promise<PauseResult> {
  const consumer = knownConsumer(deps, args.consumer).name;
  const worker = args.worker || !args.ingest;
  // Configuration problems are found before anything is switched.
  if (worker) workerScheduleOf(deps, consumer);
  const mappings = args.ingest ? ingestMappingsOf(deps, consumer) : [];
  const actor = actorOf(args, inv);

  const targets: TargetChange[] = [];
  let failure: unknown;
  try {
    if (worker) targets.push(await switchWorkerSchedule(deps, consumer, action));
    for (const uuid of mappings) targets.push(await switchIngestMapping(deps, uuid, action));
  } catch (error) {
    failure = error;
  }
  const entry: OperatorActionEntry = {
    action,
    actor,
    reason: args.reason ?? null,
    source: args.source ?? inv.source,
    dryRun: false,
    consumerNames: [consumer],
    request: { worker, ingest: args.ingest },
    affectedCount: targets.filter((t) => t.changed).length,
    outcome: {
      targets,
      ...(failure !== undefined ? { error: failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure) } : {}),
    },
  };
  const auditId = await recordOrLog(deps, entry);
  deps.logger?.info(`ops_${action}`, { consumer, targets, actor, reason: args.reason, auditId, failed: failure !== undefined });
  if (failure !== undefined) throw failure;
  return { consumer, action, targets, auditId };
}

export function formatPause(r: PauseResult): string {
  const lines = r.targets.map((t) => {
    const what = t.kind === 'worker-schedule' ? `worker schedule ${t.id}` : `ingest mapping ${t.id}`;
    return t.changed ? `${r.consumer}: ${what} ${t.previous} → ${t.state}` : `${r.consumer}: ${what} already ${t.state}; nothing changed`;
  });
  lines.push(auditLine(r.auditId));
  return lines.join('\n');
}
