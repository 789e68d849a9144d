/**
 * The AWS side of pause and resume (pause-targets.ts says how it goes with the database):
 * which schedule, worker and mappings are the consumer's, and switching each of them.
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
import type { OpsDeps } from './command';
import { readConsumerEntry } from './consumer-directory';
import { OpsError, OpsErrorCodes } from './errors';

export type Action = 'pause' | 'resume';

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
 * A consumer's entry in the consumer directory (./consumer-directory.ts: in AWS an SSM
 * parameter its stack wrote; the local run and the tests give theirs the same way), read
 * once per command.
 */
export interface ConsumerTargets {
  workerSchedule: string;
  workerFunction: string;
  ingestMappings: string[];
  /** Where these came from, for the messages. */
  source: string;
}

export async function targetsOf(deps: OpsDeps, consumer: string): Promise<ConsumerTargets> {
  const path = deps.config.consumerDirectory;
  if (path === undefined || deps.ssm === undefined) {
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `no consumer directory is configured (CONSUMER_DIRECTORY): ops cannot find "${consumer}"'s schedule or mappings`,
    );
  }
  const entry = await readConsumerEntry(deps.ssm, path, consumer);
  return { ...entry, source: `the consumer directory (${path}${consumer})` };
}

export function workerScheduleOf(deps: OpsDeps, targets: ConsumerTargets): { name: string; groupName: string | undefined } {
  return { name: targets.workerSchedule, groupName: deps.config.scheduler.groupName };
}

export function ingestMappingsOf(consumer: string, targets: ConsumerTargets): string[] {
  const uuids = targets.ingestMappings;
  if (uuids.length === 0) {
    throw new OpsError(OpsErrorCodes.NOT_CONFIGURED, `consumer "${consumer}" has no ingest mappings in ${targets.source}`);
  }
  return uuids;
}

export async function switchWorkerSchedule(
  deps: OpsDeps,
  consumer: string,
  targets: ConsumerTargets,
  action: Action,
): Promise<TargetChange> {
  const ref = workerScheduleOf(deps, targets);
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
export async function switchIngestMapping(deps: OpsDeps, uuid: string, action: Action): Promise<TargetChange> {
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

/** Invoke the consumer's worker once (asynchronously), so that what waited is processed now. */
export async function wakeAfterResume(deps: OpsDeps, consumer: string, targets: ConsumerTargets): Promise<'sent' | 'failed'> {
  try {
    await deps.lambda.send(
      new InvokeCommand({
        FunctionName: targets.workerFunction,
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
