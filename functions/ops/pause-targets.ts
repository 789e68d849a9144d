/**
 * What pause and resume switch: a consumer's worker schedule (EventBridge Scheduler).
 */
import {
  GetScheduleCommand,
  ResourceNotFoundException,
  UpdateScheduleCommand,
  type GetScheduleCommandOutput,
  type UpdateScheduleCommandInput,
} from '@aws-sdk/client-scheduler';
import { z } from 'zod';
import { caller, reasonText, text } from './args';
import { actorOf, knownConsumer, type Invocation, type OpsDeps } from './command';
import { OpsError, OpsErrorCodes } from './errors';

export const pauseSchema = z.strictObject({ ...caller, consumer: text, reason: reasonText.optional() });
export type PauseArgs = z.output<typeof pauseSchema>;

interface ScheduleRef {
  name: string;
  groupName: string | undefined;
}

function workerSchedule(deps: OpsDeps, consumerName: string): ScheduleRef {
  const consumer = knownConsumer(deps, consumerName);
  const name = deps.config.scheduler.workerSchedules[consumer.name];
  if (name === undefined) {
    const configured = Object.keys(deps.config.scheduler.workerSchedules);
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `consumer "${consumer.name}" has no worker schedule in WORKER_SCHEDULES (configured: ${configured.join(', ') || 'none'})`,
    );
  }
  return { name, groupName: deps.config.scheduler.groupName };
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

export interface PauseResult {
  consumer: string;
  schedule: string;
  groupName: string;
  previous: string;
  state: 'ENABLED' | 'DISABLED';
  changed: boolean;
}

export async function setWorkerState(
  deps: OpsDeps,
  args: PauseArgs,
  inv: Invocation,
  state: 'ENABLED' | 'DISABLED',
): Promise<PauseResult> {
  const ref = workerSchedule(deps, args.consumer);
  const actor = actorOf(args, inv);
  let current: GetScheduleCommandOutput;
  try {
    current = await deps.scheduler.send(
      new GetScheduleCommand({ Name: ref.name, ...(ref.groupName !== undefined ? { GroupName: ref.groupName } : {}) }),
    );
  } catch (error) {
    if (error instanceof ResourceNotFoundException) {
      throw new OpsError(OpsErrorCodes.NOT_FOUND, `schedule ${ref.groupName ?? 'default'}/${ref.name} does not exist`);
    }
    throw error;
  }
  const previous = current.State ?? 'ENABLED';
  const changed = previous !== state;
  // Already in the wanted state: no write, so a repeated pause cannot race a resume.
  if (changed) await deps.scheduler.send(new UpdateScheduleCommand(updateInputFrom(current, state)));
  deps.logger?.info(state === 'DISABLED' ? 'ops_pause' : 'ops_resume', {
    consumer: args.consumer,
    schedule: ref.name,
    previous,
    state,
    changed,
    actor,
    reason: args.reason,
  });
  return { consumer: args.consumer, schedule: ref.name, groupName: ref.groupName ?? 'default', previous, state, changed };
}

export function formatPause(r: PauseResult): string {
  return r.changed
    ? `${r.consumer}: schedule ${r.groupName}/${r.schedule} ${r.previous} → ${r.state}`
    : `${r.consumer}: schedule ${r.groupName}/${r.schedule} already ${r.state}; nothing changed`;
}
