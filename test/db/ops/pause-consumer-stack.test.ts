/**
 * `npm run ops -- pause` and `resume` for a consumer deployed in a consumer stack, configured
 * as the ops function is in AWS: no map of the consumers, only the consumer directory's SSM
 * path and the schedule group. The exact SSM, Scheduler and Lambda commands (aws-sdk-client-
 * mock, on every client the CLI creates) and the pause rows in the real database.
 */
import { GetEventSourceMappingCommand, InvokeCommand, LambdaClient, UpdateEventSourceMappingCommand } from '@aws-sdk/client-lambda';
import { GetScheduleCommand, SchedulerClient, UpdateScheduleCommand, type GetScheduleCommandOutput } from '@aws-sdk/client-scheduler';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { workerScheduleName } from '../../../cdk/constructs/scheduled';
import { DatabaseRoles } from '../../../functions/lib/database-roles';
import { parseConfig } from '../../../functions/lib/config';
import { main } from '../../../functions/ops/cli';
import { useTestDatabase } from '../../helpers/db';

const db = await useTestDatabase();
const ssmMock = mockClient(SSMClient);
const schedulerMock = mockClient(SchedulerClient);
const lambdaMock = mockClient(LambdaClient);

const DIRECTORY = '/KafkaInbox/dev/consumers/';
const GROUP = 'KafkaInbox-dev-stateless-SchedulesGroup1A2B3C4D';
const CONSUMER = 'case-projection';
const WORKER = 'KafkaInbox-dev-consumers-CaseProjectionWorkerFunc-Ab12Cd34Ef56';
const MAPPING = '7d0c3b2a-1111-4000-8000-00000000000c';

/** The ops function's configuration in AWS, with the CLI's database user. */
const config = () =>
  parseConfig({ DATABASE_URL: db.urlAs(DatabaseRoles.ops), DB_POOL_MAX: '2', CONSUMER_DIRECTORY: DIRECTORY, SCHEDULE_GROUP_NAME: GROUP });

async function ops(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, { stdout: (t) => (stdout += `${t}\n`), stderr: (t) => (stderr += `${t}\n`) }, config);
  return { code, stdout, stderr };
}

function schedule(state: 'ENABLED' | 'DISABLED'): GetScheduleCommandOutput {
  return {
    $metadata: {},
    Arn: `arn:aws:scheduler:eu-west-1:123456789012:schedule/${GROUP}/worker-${CONSUMER}`,
    GroupName: GROUP,
    Name: `worker-${CONSUMER}`,
    ScheduleExpression: 'rate(1 minute)',
    Description: `Drain the ${CONSUMER} inbox`,
    State: state,
    Target: {
      Arn: `arn:aws:lambda:eu-west-1:123456789012:function:${WORKER}`,
      RoleArn: 'arn:aws:iam::123456789012:role/KafkaInbox-dev-stateless-SchedulesRole',
      Input: '{"source":"schedule"}',
      RetryPolicy: { MaximumEventAgeInSeconds: 120, MaximumRetryAttempts: 2 },
      DeadLetterConfig: { Arn: 'arn:aws:sqs:eu-west-1:123456789012:KafkaInbox-dev-stateless-DeadLetters' },
    },
    FlexibleTimeWindow: { Mode: 'OFF' },
  };
}

const sent = (mock: { calls(): { args: unknown[] }[] }) =>
  mock.calls().map((c) => {
    const command = c.args[0] as { constructor: { name: string }; input: unknown };
    return [command.constructor.name, command.input];
  });

const pauses = () =>
  db.sql`select target, paused_by, reason from integration.consumer_pause where consumer_name = ${CONSUMER} order by target`;

beforeEach(async () => {
  ssmMock.reset();
  schedulerMock.reset();
  lambdaMock.reset();
  await db.sql`delete from integration.consumer_pause`;
  ssmMock.on(GetParameterCommand, { Name: `${DIRECTORY}${CONSUMER}` }).resolves({
    Parameter: {
      Name: `${DIRECTORY}${CONSUMER}`,
      Value: JSON.stringify({ workerSchedule: `worker-${CONSUMER}`, workerFunction: WORKER, ingestMappings: [MAPPING] }),
    },
  });
});

describe('ops for a consumer in a consumer stack', () => {
  it('pause finds the worker schedule and the mappings in the directory, and switches exactly those', async () => {
    schedulerMock.on(GetScheduleCommand).resolves(schedule('ENABLED'));
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    lambdaMock.on(GetEventSourceMappingCommand).resolves({ UUID: MAPPING, State: 'Enabled' });
    lambdaMock.on(UpdateEventSourceMappingCommand).resolves({ UUID: MAPPING, State: 'Disabling' });

    const out = await ops('pause', '--consumer', CONSUMER, '--worker', '--ingest', '--reason', 'INC-7', '--actor', 'alice');

    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(sent(ssmMock)).toEqual([['GetParameterCommand', { Name: '/KafkaInbox/dev/consumers/case-projection' }]]);
    const { $metadata: _m, Arn: _a, State: _s, ...carried } = schedule('ENABLED');
    expect(sent(schedulerMock)).toEqual([
      ['GetScheduleCommand', { Name: workerScheduleName(CONSUMER), GroupName: GROUP }],
      ['UpdateScheduleCommand', { ...carried, State: 'DISABLED' }],
    ]);
    expect(sent(lambdaMock)).toEqual([
      ['GetEventSourceMappingCommand', { UUID: MAPPING }],
      ['UpdateEventSourceMappingCommand', { UUID: MAPPING, Enabled: false }],
    ]);
    expect(await pauses()).toEqual([
      { target: 'ingest', paused_by: 'alice', reason: 'INC-7' },
      { target: 'worker', paused_by: 'alice', reason: 'INC-7' },
    ]);
  });

  it('resume switches them back and wakes the worker the directory names', async () => {
    schedulerMock.on(GetScheduleCommand).resolves(schedule('ENABLED'));
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    lambdaMock.on(GetEventSourceMappingCommand).resolves({ UUID: MAPPING, State: 'Enabled' });
    lambdaMock.on(UpdateEventSourceMappingCommand).resolves({ UUID: MAPPING, State: 'Disabling' });
    expect((await ops('pause', '--consumer', CONSUMER, '--worker', '--ingest', '--reason', 'INC-7', '--actor', 'alice')).code).toBe(0);
    ssmMock.resetHistory();
    schedulerMock.reset();
    lambdaMock.reset();
    schedulerMock.on(GetScheduleCommand).resolves(schedule('DISABLED'));
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    lambdaMock.on(GetEventSourceMappingCommand).resolves({ UUID: MAPPING, State: 'Disabled' });
    lambdaMock.on(UpdateEventSourceMappingCommand).resolves({ UUID: MAPPING, State: 'Enabling' });
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });

    const out = await ops('resume', '--consumer', CONSUMER, '--worker', '--ingest', '--reason', 'INC-7 fixed', '--actor', 'alice');

    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    expect(sent(ssmMock)).toEqual([['GetParameterCommand', { Name: '/KafkaInbox/dev/consumers/case-projection' }]]);
    const { $metadata: _m, Arn: _a, State: _s, ...carried } = schedule('DISABLED');
    expect(sent(schedulerMock)).toEqual([
      ['GetScheduleCommand', { Name: 'worker-case-projection', GroupName: GROUP }],
      ['UpdateScheduleCommand', { ...carried, State: 'ENABLED' }],
    ]);
    expect(sent(lambdaMock)).toEqual([
      ['GetEventSourceMappingCommand', { UUID: MAPPING }],
      ['UpdateEventSourceMappingCommand', { UUID: MAPPING, Enabled: true }],
      ['InvokeCommand', { FunctionName: WORKER, InvocationType: 'Event', Payload: Buffer.from('{"source":"resume"}') }],
    ]);
    expect(out.stdout).toContain('worker woken');
    expect(await pauses()).toEqual([]);
  });

  it('refuses a consumer its stage did not deploy, switching nothing', async () => {
    ssmMock
      .on(GetParameterCommand, { Name: `${DIRECTORY}case-sla` })
      .rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));

    const out = await ops('pause', '--consumer', 'case-sla', '--reason', 'INC-8', '--json');

    expect(out.code).toBe(1);
    expect(JSON.parse(out.stdout)).toMatchObject({
      ok: false,
      error: {
        code: 'NOT_CONFIGURED',
        message: 'consumer "case-sla" is not deployed in this stage (no SSM parameter /KafkaInbox/dev/consumers/case-sla)',
      },
    });
    expect(sent(schedulerMock)).toEqual([]);
    expect(sent(lambdaMock)).toEqual([]);
    expect(await db.sql`select * from integration.consumer_pause`).toEqual([]);
  });
});
