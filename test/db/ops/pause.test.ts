/**
 * pause and resume, of the worker schedule and of the ingest event-source mappings: the
 * exact Scheduler and Lambda commands (aws-sdk-client-mock), and the audit row each leaves
 * in the real database.
 */
import {
  GetEventSourceMappingCommand,
  InvokeCommand,
  LambdaClient,
  ResourceNotFoundException as MappingNotFound,
  UpdateEventSourceMappingCommand,
} from '@aws-sdk/client-lambda';
import {
  CreateScheduleCommand,
  GetScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
  UpdateScheduleCommand,
  type GetScheduleCommandOutput,
} from '@aws-sdk/client-scheduler';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import type { OpsDeps } from '../../../functions/ops/command';
import { useTestDatabase } from '../../helpers/db';
import { COMMANDS } from '../../../functions/ops/commands';
import { insertInboxRows, pauseConsumer } from '../../helpers/factories';
import { directoryEntry, directoryOf, opsDeps, opsError, run, schedulerConfig } from './support';

const db = await useTestDatabase();
const scheduler = new SchedulerClient({ region: 'eu-west-1' });
const lambda = new LambdaClient({ region: 'eu-west-1' });
const schedulerMock = mockClient(scheduler);
const lambdaMock = mockClient(lambda);
const MAPPING_A = '0a6c2f3e-1111-4000-8000-00000000000a';
const MAPPING_B = '0a6c2f3e-2222-4000-8000-00000000000b';
const deps: OpsDeps = opsDeps(db.sql, {
  scheduler,
  lambda,
  ssm: directoryOf({ 'case-projection': directoryEntry('case-projection', { ingestMappings: [MAPPING_A, MAPPING_B] }) }),
});

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

function carriedBack(current: GetScheduleCommandOutput, state: 'ENABLED' | 'DISABLED') {
  const { $metadata: _m, Arn: _a, CreationDate: _c, LastModificationDate: _l, ...carried } = current;
  return { ...carried, State: state };
}

/** Each mock's calls as [command name, input], in order. */
const sent = (mock: typeof schedulerMock | typeof lambdaMock) =>
  mock.calls().map((c) => [(c.args[0] as { constructor: { name: string } }).constructor.name, c.args[0].input]);

const audits = () => db.sql`select * from integration.operator_audit order by created_at`;
const pauses = () =>
  db.sql`select consumer_name, target, paused_by, reason, audit_id from integration.consumer_pause order by consumer_name, target`;

beforeEach(async () => {
  schedulerMock.reset();
  lambdaMock.reset();
  await db.sql`truncate integration.operator_audit, integration.consumer_pause`;
});

describe('pause: the worker schedule (the default)', () => {
  it('reads the schedule, writes every field back with only State changed, and records it', async () => {
    const current = scheduleAs('ENABLED');
    schedulerMock.on(GetScheduleCommand).resolves(current);
    schedulerMock.on(UpdateScheduleCommand).resolves({ ScheduleArn: current.Arn });

    const result = await run(deps, { command: 'pause', consumer: 'case-projection', reason: 'INC-9' });

    expect(sent(schedulerMock)).toEqual([
      ['GetScheduleCommand', { Name: 'inbox-worker-case-projection', GroupName: 'inbox-schedules' }],
      ['UpdateScheduleCommand', carriedBack(current, 'DISABLED')],
    ]);
    expect(lambdaMock.calls()).toHaveLength(0);
    const target = {
      kind: 'worker-schedule',
      id: 'inbox-schedules/inbox-worker-case-projection',
      previous: 'ENABLED',
      state: 'DISABLED',
      changed: true,
    };
    expect(result).toEqual({
      consumer: 'case-projection',
      action: 'pause',
      targets: [target],
      paused: [{ target: 'worker', pausedBy: 'alice', reason: 'INC-9', since: expect.any(Date) }],
      inFlight: 0,
      auditId: expect.any(String),
    });
    // The pause the workers obey, written with its audit row.
    expect(await pauses()).toEqual([
      { consumer_name: 'case-projection', target: 'worker', paused_by: 'alice', reason: 'INC-9', audit_id: result.auditId },
    ]);
    const [audit, ...more] = await audits();
    expect(more).toHaveLength(0);
    expect(audit).toMatchObject({
      audit_id: result.auditId,
      action: 'pause',
      actor: 'alice',
      reason: 'INC-9',
      source: 'cli',
      dry_run: false,
      consumer_names: ['case-projection'],
      request: { worker: true, ingest: false },
      affected_count: 1,
      inbox_ids: [],
      outcome: { targets: [target], database: ['worker'] },
    });
  });

  it('writes nothing to the schedule when it is already disabled, and records that nothing changed', async () => {
    schedulerMock.on(GetScheduleCommand).resolves(scheduleAs('DISABLED'));

    const result = await run(deps, { command: 'pause', consumer: 'case-projection' });

    expect(result.targets).toEqual([expect.objectContaining({ changed: false, state: 'DISABLED' })]);
    expect(schedulerMock.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
    expect(schedulerMock.commandCalls(CreateScheduleCommand)).toHaveLength(0);
    const [audit] = await audits();
    expect(audit).toMatchObject({ action: 'pause', affected_count: 0, reason: null });
  });
});

describe('resume: the worker schedule', () => {
  it('enables the schedule, carrying every field back, and lifts the pause', async () => {
    const current = scheduleAs('DISABLED');
    schedulerMock.on(GetScheduleCommand).resolves(current);
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    await pauseConsumer(db.sql, 'case-projection');

    const result = await run(deps, { command: 'resume', consumer: 'case-projection' });

    expect(sent(schedulerMock)).toEqual([
      ['GetScheduleCommand', { Name: 'inbox-worker-case-projection', GroupName: 'inbox-schedules' }],
      ['UpdateScheduleCommand', carriedBack(current, 'ENABLED')],
    ]);
    const resumeAudit = (await audits()).find((a) => a.action === 'resume');
    expect(resumeAudit).toMatchObject({ action: 'resume', affected_count: 1 });
    expect(await pauses()).toEqual([]);
    expect(result).toMatchObject({ paused: [], wakeUp: 'sent' });
  });

  it("wakes the consumer's worker once the pause is lifted: one asynchronous Invoke with a resume event", async () => {
    schedulerMock.on(GetScheduleCommand).resolves(scheduleAs('DISABLED'));
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });
    await pauseConsumer(db.sql, 'case-projection');
    const result = await run(deps, { command: 'resume', consumer: 'case-projection', reason: 'downstream back' });

    expect(sent(lambdaMock)).toEqual([
      [
        'InvokeCommand',
        { FunctionName: 'inbox-worker-fn-case-projection', InvocationType: 'Event', Payload: Buffer.from('{"source":"resume"}') },
      ],
    ]);
    expect(result).toMatchObject({ paused: [], wakeUp: 'sent' });
  });
});

describe('pause and resume: the database and AWS disagree', () => {
  it('a worker pause holds in the database when the schedule cannot be disabled, and the command says so', async () => {
    schedulerMock.on(GetScheduleCommand).resolves(scheduleAs('ENABLED'));
    schedulerMock.on(UpdateScheduleCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));

    const error = await opsError(run(deps, { command: 'pause', consumer: 'case-projection', reason: 'INC-10' }), 'PARTIALLY_APPLIED');

    expect(error.message).toContain('ThrottlingException: Rate exceeded');
    expect(error.message).toContain('IS paused for its workers');
    expect(await pauses()).toEqual([expect.objectContaining({ consumer_name: 'case-projection', target: 'worker', paused_by: 'alice' })]);
    const [audit] = await audits();
    expect(audit).toMatchObject({
      action: 'pause',
      affected_count: 0,
      outcome: { targets: [], database: ['worker'], error: 'ThrottlingException: Rate exceeded' },
    });
  });

  it('a worker pause the database cannot record is no pause for the workers, and the command says so', async () => {
    schedulerMock.on(GetScheduleCommand).resolves(scheduleAs('ENABLED'));
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    const gone = db.client();
    await gone.end();
    const logged: string[] = [];
    const logger = { info() {}, error: (m: string) => logged.push(m) };

    const error = await opsError(
      run({ ...deps, sql: gone, logger }, { command: 'pause', consumer: 'case-projection', reason: 'db down' }),
      'PARTIALLY_APPLIED',
    );

    expect(error.message).toContain('NOT paused for its workers');
    expect(schedulerMock.commandCalls(UpdateScheduleCommand)).toHaveLength(1);
    expect(logged).toEqual(['ops_audit_unwritten']);
  });
});

describe('pause and resume --ingest: the event-source mappings', () => {
  it("pause --ingest disables each of the consumer's mappings with Enabled: false, and leaves the worker alone", async () => {
    lambdaMock.on(GetEventSourceMappingCommand).resolves({ State: 'Enabled' });
    lambdaMock.on(UpdateEventSourceMappingCommand).resolves({ State: 'Disabling' });

    const result = await run(deps, { command: 'pause', consumer: 'case-projection', ingest: true, reason: 'database overloaded' });

    expect(sent(lambdaMock)).toEqual([
      ['GetEventSourceMappingCommand', { UUID: MAPPING_A }],
      ['UpdateEventSourceMappingCommand', { UUID: MAPPING_A, Enabled: false }],
      ['GetEventSourceMappingCommand', { UUID: MAPPING_B }],
      ['UpdateEventSourceMappingCommand', { UUID: MAPPING_B, Enabled: false }],
    ]);
    expect(schedulerMock.calls()).toHaveLength(0);
    expect(result.targets).toEqual([
      { kind: 'ingest-mapping', id: MAPPING_A, previous: 'Enabled', state: 'Disabling', changed: true },
      { kind: 'ingest-mapping', id: MAPPING_B, previous: 'Enabled', state: 'Disabling', changed: true },
    ]);
    const [audit] = await audits();
    expect(audit).toMatchObject({
      action: 'pause',
      request: { worker: false, ingest: true },
      affected_count: 2,
      reason: 'database overloaded',
    });
  });

  it('resume --ingest --worker enables the worker schedule and each mapping not already on its way', async () => {
    const current = scheduleAs('DISABLED');
    schedulerMock.on(GetScheduleCommand).resolves(current);
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    lambdaMock.on(GetEventSourceMappingCommand, { UUID: MAPPING_A }).resolves({ State: 'Disabled' });
    lambdaMock.on(GetEventSourceMappingCommand, { UUID: MAPPING_B }).resolves({ State: 'Enabling' });
    lambdaMock.on(UpdateEventSourceMappingCommand).resolves({ State: 'Enabling' });

    const result = await run(deps, { command: 'resume', consumer: 'case-projection', ingest: true, worker: true });

    expect(sent(schedulerMock)).toEqual([
      ['GetScheduleCommand', { Name: 'inbox-worker-case-projection', GroupName: 'inbox-schedules' }],
      ['UpdateScheduleCommand', carriedBack(current, 'ENABLED')],
    ]);
    expect(sent(lambdaMock)).toEqual([
      ['GetEventSourceMappingCommand', { UUID: MAPPING_A }],
      ['UpdateEventSourceMappingCommand', { UUID: MAPPING_A, Enabled: true }],
      ['GetEventSourceMappingCommand', { UUID: MAPPING_B }],
      // The worker resumed: woken once, as the consumer's directory entry names it.
      [
        'InvokeCommand',
        { FunctionName: 'inbox-worker-fn-case-projection', InvocationType: 'Event', Payload: Buffer.from('{"source":"resume"}') },
      ],
    ]);
    expect(result.targets.map((t: { changed: boolean }) => t.changed)).toEqual([true, true, false]);
    const [audit] = await audits();
    expect(audit).toMatchObject({ action: 'resume', request: { worker: true, ingest: true }, affected_count: 2 });
  });

  it('records what was switched before a call failed, with the error, and fails saying what holds', async () => {
    lambdaMock.on(GetEventSourceMappingCommand).resolves({ State: 'Enabled' });
    lambdaMock.on(UpdateEventSourceMappingCommand, { UUID: MAPPING_A }).resolves({ State: 'Disabling' });
    lambdaMock
      .on(UpdateEventSourceMappingCommand, { UUID: MAPPING_B })
      .rejects(Object.assign(new Error('not authorized to perform lambda:UpdateEventSourceMapping'), { name: 'AccessDeniedException' }));

    const error = await opsError(run(deps, { command: 'pause', consumer: 'case-projection', ingest: true }), 'PARTIALLY_APPLIED');

    expect(error.message).toContain('AccessDeniedException: not authorized to perform lambda:UpdateEventSourceMapping');
    expect(error.message).toContain('ingest may be only partly paused');
    const [audit] = await audits();
    expect(audit).toMatchObject({
      action: 'pause',
      affected_count: 1,
      outcome: {
        targets: [{ kind: 'ingest-mapping', id: MAPPING_A, changed: true }],
        // Not recorded as paused: one of its mappings still delivers.
        database: [],
        error: 'AccessDeniedException: not authorized to perform lambda:UpdateEventSourceMapping',
      },
    });
    expect(await pauses()).toEqual([]);
  });

  it('still pauses when the database cannot take the audit row, says so and logs the row', async () => {
    lambdaMock.on(GetEventSourceMappingCommand).resolves({ State: 'Enabled' });
    lambdaMock.on(UpdateEventSourceMappingCommand).resolves({ State: 'Disabling' });
    const gone = db.client();
    await gone.end();
    const logged: [string, Record<string, unknown>][] = [];
    const logger = { info() {}, error: (m: string, extra: Record<string, unknown>) => logged.push([m, extra]) };

    const result = await run(
      { ...deps, sql: gone, logger },
      { command: 'pause', consumer: 'case-projection', ingest: true, reason: 'db down' },
    );

    expect(result.auditId).toBeNull();
    expect(lambdaMock.commandCalls(UpdateEventSourceMappingCommand).map((c) => c.args[0].input)).toEqual([
      { UUID: MAPPING_A, Enabled: false },
      { UUID: MAPPING_B, Enabled: false },
    ]);
    expect(logged).toEqual([
      ['ops_audit_unwritten', expect.objectContaining({ action: 'pause', actor: 'alice', reason: 'db down', affectedCount: 2 })],
    ]);
  });
});

describe('refusals', () => {
  it('names the problem and sends nothing', async () => {
    // No directory configured; a consumer its stage did not deploy (no entry); an entry without mappings.
    const { consumerDirectory: _path, ...withoutDirectory } = schedulerConfig();
    const noDirectory = opsDeps(db.sql, { scheduler, lambda, config: withoutDirectory });
    const noEntry = opsDeps(db.sql, { scheduler, lambda, ssm: directoryOf({}) });
    const noMappings = opsDeps(db.sql, { scheduler, lambda, ssm: directoryOf({ 'case-projection': directoryEntry('case-projection') }) });
    await opsError(run(deps, { command: 'pause', consumer: 'nobody' }), 'UNKNOWN_CONSUMER');
    expect((await opsError(run(noDirectory, { command: 'pause', consumer: 'case-projection' }), 'NOT_CONFIGURED')).message).toContain(
      'CONSUMER_DIRECTORY',
    );
    expect((await opsError(run(noEntry, { command: 'pause', consumer: 'case-projection' }), 'NOT_CONFIGURED')).message).toContain(
      'is not deployed in this stage',
    );
    expect(
      (await opsError(run(noMappings, { command: 'resume', consumer: 'case-projection', ingest: true }), 'NOT_CONFIGURED')).message,
    ).toContain('has no ingest mappings in the consumer directory');
    await opsError(run(deps, { command: 'pause' }), 'BAD_ARGUMENTS');
    await opsError(run(deps, { command: 'pause', consumer: 'case-projection' }, { source: 'lambda' }), 'ACTOR_REQUIRED');
    expect(schedulerMock.calls()).toHaveLength(0);
    expect(lambdaMock.calls()).toHaveLength(0);
    expect(await audits()).toHaveLength(0);
  });

  it('turns a missing schedule or mapping into NOT_FOUND', async () => {
    schedulerMock
      .on(GetScheduleCommand)
      .rejects(new ResourceNotFoundException({ message: 'Schedule not found', $metadata: {}, Message: 'Schedule not found' }));
    lambdaMock.on(GetEventSourceMappingCommand).rejects(new MappingNotFound({ message: 'not found', $metadata: {} }));

    await opsError(run(deps, { command: 'resume', consumer: 'case-projection' }), 'NOT_FOUND');
    await opsError(run(deps, { command: 'resume', consumer: 'case-projection', ingest: true }), 'NOT_FOUND');

    expect(schedulerMock.commandCalls(UpdateScheduleCommand)).toHaveLength(0);
    expect(lambdaMock.commandCalls(UpdateEventSourceMappingCommand)).toHaveLength(0);
  });
});

describe('stats and event say that a consumer is paused, by whom, why and since when', () => {
  it('lists the pause in stats (and its table) and in every story of that consumer', async () => {
    schedulerMock.on(GetScheduleCommand).resolves(scheduleAs('ENABLED'));
    schedulerMock.on(UpdateScheduleCommand).resolves({});
    const [row] = await insertInboxRows(db.sql, [{ eventId: 'evt-paused-1' }]);
    await db.sql`truncate integration.consumer_pause`;

    await run(deps, { command: 'pause', consumer: 'case-projection', reason: 'downstream outage' });
    const stats = await run(deps, { command: 'stats' });
    const event = await run(deps, { command: 'event', eventId: 'evt-paused-1' });

    const pause = { target: 'worker', pausedBy: 'alice', reason: 'downstream outage', since: expect.any(Date) };
    expect(stats.consumers.find((c: { consumer: string }) => c.consumer === 'case-projection').paused).toEqual([pause]);
    expect(stats.consumers.find((c: { consumer: string }) => c.consumer === 'case-sla').paused).toEqual([]);
    expect(COMMANDS.stats.format(stats)).toMatch(/case-projection: worker paused by alice since \S+Z \(downstream outage\)/);
    expect(event.events).toEqual([expect.objectContaining({ inboxId: row!.inbox_id, consumerPaused: [pause] })]);
    expect(COMMANDS.event.format(event)).toMatch(/consumer +worker paused by alice since/);
  });
});
