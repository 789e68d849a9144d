import {
  CreateScheduleCommand,
  GetScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
  UpdateScheduleCommand,
  type GetScheduleCommandOutput,
} from '@aws-sdk/client-scheduler';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Sql } from '../../../functions/lib/db';
import type { OpsDeps } from '../../../functions/ops/command';
import { OpsError } from '../../../functions/ops/errors';
import { runCommand } from '../../../functions/ops/run';

const scheduler = new SchedulerClient({ region: 'eu-west-1' });
const mock = mockClient(scheduler);

const deps: OpsDeps = {
  // pause and resume never touch the database.
  sql: {} as Sql,
  scheduler,
  config: {
    scheduler: {
      groupName: 'inbox-schedules',
      workerSchedules: { 'case-projection': 'inbox-worker-case-projection' },
    },
    maxPayloadBytes: 1024,
  },
};
const cli = { source: 'cli' as const, defaultActor: 'alice' };

/** A schedule as GetSchedule returns it, with every field set (so that any dropped field shows). */
function scheduleAs(state: 'ENABLED' | 'DISABLED'): GetScheduleCommandOutput {
  return {
    $metadata: { httpStatusCode: 200, requestId: 'req-1' },
    Arn: 'arn:aws:scheduler:eu-west-1:123456789012:schedule/inbox-schedules/inbox-worker-case-projection',
    GroupName: 'inbox-schedules',
    Name: 'inbox-worker-case-projection',
    ScheduleExpression: 'rate(1 minute)',
    ScheduleExpressionTimezone: 'Europe/Brussels',
    StartDate: new Date('2026-01-01T00:00:00Z'),
    EndDate: new Date('2030-01-01T00:00:00Z'),
    Description: 'Kafka inbox worker: case-projection',
    State: state,
    CreationDate: new Date('2026-01-01T00:00:00Z'),
    LastModificationDate: new Date('2026-06-01T00:00:00Z'),
    KmsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    Target: {
      Arn: 'arn:aws:lambda:eu-west-1:123456789012:function:inbox-worker-case-projection',
      RoleArn: 'arn:aws:iam::123456789012:role/inbox-scheduler',
      Input: '{"source":"schedule"}',
      RetryPolicy: { MaximumEventAgeInSeconds: 60, MaximumRetryAttempts: 0 },
      DeadLetterConfig: { Arn: 'arn:aws:sqs:eu-west-1:123456789012:inbox-schedule-dlq' },
    },
    FlexibleTimeWindow: { Mode: 'OFF' },
    ActionAfterCompletion: 'NONE',
  };
}

beforeEach(() => mock.reset());
afterEach(() => mock.reset());

describe('pause', () => {
  it('reads the schedule, then writes every field back with only State changed', async () => {
    const current = scheduleAs('ENABLED');
    mock.on(GetScheduleCommand).resolves(current);
    mock.on(UpdateScheduleCommand).resolves({ ScheduleArn: current.Arn });

    const result = await runCommand(deps, { command: 'pause', consumer: 'case-projection', reason: 'INC-9' }, cli);

    expect(result).toEqual({
      consumer: 'case-projection',
      schedule: 'inbox-worker-case-projection',
      groupName: 'inbox-schedules',
      previous: 'ENABLED',
      state: 'DISABLED',
      changed: true,
    });
    const calls = mock.calls();
    expect(calls).toHaveLength(2);
    expect(calls[0]!.args[0]).toBeInstanceOf(GetScheduleCommand);
    expect(calls[0]!.args[0].input).toEqual({ Name: 'inbox-worker-case-projection', GroupName: 'inbox-schedules' });
    expect(calls[1]!.args[0]).toBeInstanceOf(UpdateScheduleCommand);
    const { $metadata: _m, Arn: _a, CreationDate: _c, LastModificationDate: _l, ...carried } = current;
    expect(calls[1]!.args[0].input).toEqual({ ...carried, State: 'DISABLED' });
  });

  it('writes nothing when the schedule is already disabled', async () => {
    mock.on(GetScheduleCommand).resolves(scheduleAs('DISABLED'));
    const result = await runCommand(deps, { command: 'pause', consumer: 'case-projection' }, cli);
    expect(result).toMatchObject({ changed: false, state: 'DISABLED' });
    expect(mock.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
  });
});

describe('resume', () => {
  it('enables the schedule, carrying every field back', async () => {
    const current = scheduleAs('DISABLED');
    mock.on(GetScheduleCommand).resolves(current);
    mock.on(UpdateScheduleCommand).resolves({});

    await runCommand(deps, { command: 'resume', consumer: 'case-projection' }, cli);

    const [update] = mock.commandCalls(UpdateScheduleCommand);
    const { $metadata: _m, Arn: _a, CreationDate: _c, LastModificationDate: _l, ...carried } = current;
    expect(update!.args[0].input).toEqual({ ...carried, State: 'ENABLED' });
  });
});

describe('refusals', () => {
  async function errorOf(input: Record<string, unknown>, inv: { source: 'cli' | 'lambda'; defaultActor?: string } = cli) {
    const error = await runCommand(deps, input, inv).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(OpsError);
    return error as OpsError;
  }

  it('names the problem and sends nothing', async () => {
    expect((await errorOf({ command: 'pause', consumer: 'nobody' })).code).toBe('UNKNOWN_CONSUMER');
    expect((await errorOf({ command: 'pause', consumer: 'case-sla' })).code).toBe('NOT_CONFIGURED');
    expect((await errorOf({ command: 'pause' })).code).toBe('BAD_ARGUMENTS');
    expect((await errorOf({ command: 'pause', consumer: 'case-projection' }, { source: 'lambda' })).code).toBe('ACTOR_REQUIRED');
    expect((await errorOf({ command: 'schedule-replay', consumer: 'case-projection', at: '2030-01-01T00:00:00Z', reason: 'x' })).code).toBe(
      'NOT_CONFIGURED',
    );
    expect(mock.calls()).toHaveLength(0);
  });

  it('turns a missing schedule into NOT_FOUND', async () => {
    mock.on(GetScheduleCommand).rejects(new ResourceNotFoundException({ message: 'Schedule not found', $metadata: {}, Message: 'Schedule not found' } as never));
    expect((await errorOf({ command: 'resume', consumer: 'case-projection' })).code).toBe('NOT_FOUND');
    expect(mock.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
  });

  it('never creates schedules from pause', async () => {
    mock.on(GetScheduleCommand).resolves(scheduleAs('ENABLED'));
    mock.on(UpdateScheduleCommand).resolves({});
    await runCommand(deps, { command: 'pause', consumer: 'case-projection' }, cli);
    expect(mock.commandCalls(CreateScheduleCommand)).toHaveLength(0);
  });
});
