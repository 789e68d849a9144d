import { CreateScheduleCommand, SchedulerClient } from '@aws-sdk/client-scheduler';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { createOpsHandler, runCommand } from '../../../functions/ops/run';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { opsDeps, opsError, schedulerConfig } from './support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const scheduler = new SchedulerClient({ region: 'eu-west-1' });
const mock = mockClient(scheduler);
const now = () => new Date('2026-07-03T09:00:00Z');
const deps = opsDeps(db.as(DatabaseRoles.ops), { scheduler, now });
const cli = { source: 'cli' as const, defaultActor: 'alice' };
const silentLogger = { info() {}, warn() {}, error() {} };

beforeEach(async () => {
  mock.reset();
  await db.sql`truncate integration.consumer_inbox, integration.operator_audit`;
});

describe('schedule-replay', () => {
  it('creates a one-time at() schedule that invokes the ops function with the replay, deleted after it runs', async () => {
    await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
    ]);
    mock.on(CreateScheduleCommand).resolves({ ScheduleArn: 'arn:aws:scheduler:eu-west-1:123456789012:schedule/inbox-schedules/ops-replay-night' });

    const result = await runCommand(
      deps,
      {
        command: 'schedule-replay',
        consumer: 'case-projection',
        errorCode: 'DB_TRANSIENT',
        at: '2026-07-03T23:30:00+02:00',
        reason: 'replay after the maintenance window',
        limit: 500,
        name: 'ops-replay-night',
      },
      cli,
    );

    const replayInput = {
      command: 'replay',
      source: 'schedule',
      actor: 'alice',
      reason: 'replay after the maintenance window',
      limit: 500,
      consumer: 'case-projection',
      errorCode: 'DB_TRANSIENT',
    };
    expect(mock.calls()).toHaveLength(1);
    expect(mock.commandCalls(CreateScheduleCommand)[0]!.args[0].input).toEqual({
      Name: 'ops-replay-night',
      GroupName: 'inbox-schedules',
      ScheduleExpression: 'at(2026-07-03T21:30:00)',
      ScheduleExpressionTimezone: 'UTC',
      Description: 'ops replay by alice: replay after the maintenance window',
      State: 'ENABLED',
      FlexibleTimeWindow: { Mode: 'OFF' },
      ActionAfterCompletion: 'DELETE',
      Target: {
        Arn: schedulerConfig().scheduler.opsFunctionArn,
        RoleArn: schedulerConfig().scheduler.schedulerRoleArn,
        Input: JSON.stringify(replayInput),
        RetryPolicy: { MaximumRetryAttempts: 0 },
      },
    });
    expect(result).toMatchObject({ schedule: 'ops-replay-night', matchingNow: 2, input: replayInput });
    // Scheduling changes no row and records no replay (the replay does, when it runs); it
    // records itself.
    expect(await db.sql`select count(*)::int as n from integration.consumer_inbox where status = 'QUARANTINED'`).toEqual([{ n: 3 }]);
    const audits = await db.sql`select * from integration.operator_audit`;
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({
      audit_id: (result as { auditId: string }).auditId,
      action: 'schedule-replay',
      actor: 'alice',
      reason: 'replay after the maintenance window',
      source: 'cli',
      dry_run: false,
      consumer_names: ['case-projection'],
      affected_count: 1,
      request: {
        at: '2026-07-03T21:30:00.000Z',
        schedule: 'ops-replay-night',
        replay: { source: 'schedule', actor: 'alice', limit: 500, consumer: 'case-projection', errorCode: 'DB_TRANSIENT' },
      },
      outcome: {
        scheduleArn: 'arn:aws:scheduler:eu-west-1:123456789012:schedule/inbox-schedules/ops-replay-night',
        expression: 'at(2026-07-03T21:30:00)',
        matchingNow: 2,
      },
    });
  });

  it('in the ops Lambda, targets the function itself (its unqualified ARN from the context)', async () => {
    await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);
    mock.on(CreateScheduleCommand).resolves({});
    const lambdaDeps = opsDeps(db.as(DatabaseRoles.ops), { scheduler, now, config: schedulerConfig({ opsFunctionArn: undefined }) as never });
    const handler = createOpsHandler(async () => lambdaDeps, silentLogger);
    const response = await handler(
      { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z', reason: 'later', actor: 'bob' },
      { awsRequestId: 'req-1', invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:inbox-ops-Fn:live' },
    );
    expect(response).toMatchObject({ ok: true });
    expect(mock.commandCalls(CreateScheduleCommand)[0]!.args[0].input.Target!.Arn).toBe(
      'arn:aws:lambda:eu-west-1:123456789012:function:inbox-ops-Fn',
    );
  });

  it('from the CLI, without OPS_FUNCTION_ARN, refuses with NOT_CONFIGURED and creates nothing', async () => {
    const cliDeps = opsDeps(db.as(DatabaseRoles.ops), { scheduler, now, config: schedulerConfig({ opsFunctionArn: undefined }) as never });
    const error = await opsError(
      runCommand(cliDeps, { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z', reason: 'x' }, cli),
      'NOT_CONFIGURED',
    );
    expect(error.message).toMatch(/OPS_FUNCTION_ARN when not run by the ops function/);
    expect(mock.calls()).toHaveLength(0);
  });

  it('produces an input the ops function runs as an audited replay with source schedule', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);
    mock.on(CreateScheduleCommand).resolves({});
    await runCommand(deps, { command: 'schedule-replay', ids: [row!.inbox_id], at: '2026-07-04T00:00:00Z', reason: 'later' }, cli);
    const input = JSON.parse(mock.commandCalls(CreateScheduleCommand)[0]!.args[0].input.Target!.Input!) as Record<string, unknown>;

    // What EventBridge Scheduler will deliver to the ops Lambda.
    await runCommand(deps, input, { source: 'lambda' });

    const [audit] = await db.sql`select actor, reason, source, inbox_ids from integration.operator_audit where action = 'replay' and not dry_run`;
    expect(audit).toEqual({ actor: 'alice', reason: 'later', source: 'schedule', inbox_ids: [row!.inbox_id] });
  });

  it('refuses a time in the past, a missing reason and a bad selection, and creates nothing', async () => {
    await opsError(
      runCommand(deps, { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-03T08:59:59Z', reason: 'x' }, cli),
      'BAD_ARGUMENTS',
    );
    await opsError(runCommand(deps, { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z' }, cli), 'REASON_REQUIRED');
    await opsError(runCommand(deps, { command: 'schedule-replay', consumer: 'nobody', at: '2026-07-04T00:00:00Z', reason: 'x' }, cli), 'UNKNOWN_CONSUMER');
    await opsError(runCommand(deps, { command: 'schedule-replay', consumer: 'case-projection', at: 'tomorrow', reason: 'x' }, cli), 'BAD_ARGUMENTS');
    expect(mock.calls()).toHaveLength(0);
  });

  it('refuses a schedule name outside ops-replay-*, the only names the ops role may create', async () => {
    const error = await opsError(
      runCommand(deps, { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z', reason: 'x', name: 'night-replay' }, cli),
      'BAD_ARGUMENTS',
    );
    expect(error.message).toContain('ops-replay-');
    expect(mock.calls()).toHaveLength(0);
  });
});
