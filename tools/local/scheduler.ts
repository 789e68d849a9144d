/**
 * A simulated EventBridge Scheduler for the local run: the workers' recurring schedules,
 * each ENABLED or DISABLED, and a client that answers GetSchedule and UpdateSchedule as the
 * ops commands send them (pause and resume disable and enable a worker's schedule). The
 * run's schedule loops ask `enabled` before each tick, as Scheduler fires only an enabled
 * schedule.
 */
import {
  GetScheduleCommand,
  ResourceNotFoundException,
  UpdateScheduleCommand,
  type GetScheduleCommandOutput,
  type SchedulerClient,
} from '@aws-sdk/client-scheduler';

export const LOCAL_SCHEDULE_GROUP = 'local-schedules';

interface LocalSchedule {
  functionName: string;
  state: 'ENABLED' | 'DISABLED';
}

export class SimulatedScheduler {
  private readonly schedules = new Map<string, LocalSchedule>();

  /** A recurring schedule invoking `functionName`, enabled. */
  add(name: string, functionName: string): void {
    this.schedules.set(name, { functionName, state: 'ENABLED' });
  }

  enabled(name: string): boolean {
    return this.schedules.get(name)?.state === 'ENABLED';
  }

  /** What the ops commands are given as their Scheduler client. */
  client(): Pick<SchedulerClient, 'send'> {
    const send = async (command: unknown): Promise<unknown> => {
      if (command instanceof GetScheduleCommand) return this.get(command.input.Name!);
      if (command instanceof UpdateScheduleCommand) {
        this.get(command.input.Name!);
        this.schedules.get(command.input.Name!)!.state = command.input.State === 'DISABLED' ? 'DISABLED' : 'ENABLED';
        return { ScheduleArn: `arn:local:scheduler:${LOCAL_SCHEDULE_GROUP}/${command.input.Name}` };
      }
      throw new Error(
        `the simulated scheduler answers GetSchedule and UpdateSchedule only, not ${String((command as object).constructor.name)}`,
      );
    };
    return { send: send as SchedulerClient['send'] };
  }

  private get(name: string): GetScheduleCommandOutput {
    const schedule = this.schedules.get(name);
    if (schedule === undefined)
      throw new ResourceNotFoundException({
        message: `Schedule ${name} does not exist.`,
        Message: `Schedule ${name} does not exist.`,
        $metadata: {},
      });
    return {
      $metadata: {},
      Name: name,
      GroupName: LOCAL_SCHEDULE_GROUP,
      ScheduleExpression: 'rate(1 minute)',
      State: schedule.state,
      FlexibleTimeWindow: { Mode: 'OFF' },
      Target: {
        Arn: `arn:local:lambda:function:${schedule.functionName}`,
        RoleArn: 'arn:local:iam::role/local-schedules',
        Input: '{"source":"schedule"}',
      },
    };
  }
}
