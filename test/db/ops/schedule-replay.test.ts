import { CreateScheduleCommand, SchedulerClient } from '@aws-sdk/client-scheduler';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { createOpsHandler, runCommand } from '../../../functions/ops/run';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { opsDeps, opsError, schedulerConfig } from './support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';
import type { OpsResponse } from '../../../functions/ops/run';
import { functionUrlRequest, OPERATOR_ROLE, OPERATOR_SESSION } from '../../../tools/function-url-events';

const db = await useTestDatabase();
const scheduler = new SchedulerClient({ region: 'eu-west-1' });
const mock = mockClient(scheduler);
const now = () => new Date('2026-07-03T09:00:00Z');
const deps = opsDeps(db.as(DatabaseRoles.ops), { scheduler, now });
const cli = { source: 'cli' as const, defaultActor: 'alice' };
const silentLogger = { info() {}, warn() {}, error() {} };

beforeEach(async () => {
  mock.reset();
  await db.sql`truncate integration.consumer_inbox, integration.operator_audit, integration.scheduled_replay`;
});

describe('schedule-replay', () => {
  it('records the replay and creates a one-time at() schedule whose input names only it, deleted after it runs', async () => {
    await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
    ]);
    mock
      .on(CreateScheduleCommand)
      .resolves({ ScheduleArn: 'arn:aws:scheduler:eu-west-1:123456789012:schedule/inbox-schedules/ops-replay-night' });

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

    const { replayId } = result as { replayId: string };
    const replayInput = { command: 'run-scheduled-replay', replayId };
    expect(replayId).toMatch(/^[0-9a-f-]{36}$/);
    expect(mock.calls()).toHaveLength(1);
    expect(mock.commandCalls(CreateScheduleCommand)[0]!.args[0].input).toEqual({
      Name: 'ops-replay-night',
      GroupName: 'inbox-schedules',
      ScheduleExpression: 'at(2026-07-03T21:30:00)',
      ScheduleExpressionTimezone: 'UTC',
      Description: `ops replay ${replayId} by alice`,
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
    // What, for whom and why is the database's, recorded with the audit row.
    const selection = { consumerName: 'case-projection', errorCode: 'DB_TRANSIENT' };
    expect(await db.sql`select * from integration.scheduled_replay`).toEqual([
      expect.objectContaining({
        replay_id: replayId,
        schedule_name: 'ops-replay-night',
        run_at: new Date('2026-07-03T21:30:00Z'),
        selection,
        row_limit: 500,
        actor: 'alice',
        reason: 'replay after the maintenance window',
        created_audit_id: (result as { auditId: string }).auditId,
        ran_at: null,
        ran_audit_id: null,
      }),
    ]);
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
      request: { at: '2026-07-03T21:30:00.000Z', schedule: 'ops-replay-night', replayId, selection, limit: 500 },
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
    const lambdaDeps = opsDeps(db.as(DatabaseRoles.ops), {
      scheduler,
      now,
      config: schedulerConfig({ opsFunctionArn: undefined }) as never,
    });
    const handler = createOpsHandler(async () => lambdaDeps, silentLogger, { operatorPrincipals: [OPERATOR_ROLE] });
    const response = await handler(
      functionUrlRequest(
        { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z', reason: 'later', apply: true },
        OPERATOR_SESSION,
      ),
      { awsRequestId: 'req-1', invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:inbox-ops-Fn:live' },
    );
    expect(response).toMatchObject({ statusCode: 200 });
    expect(await db.sql`select actor from integration.scheduled_replay`).toEqual([{ actor: OPERATOR_SESSION }]);
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

  it('produces an input the ops function runs as an audited replay with source schedule and its request id', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);
    mock.on(CreateScheduleCommand).resolves({});
    await runCommand(deps, { command: 'schedule-replay', ids: [row!.inbox_id], at: '2026-07-04T00:00:00Z', reason: 'later' }, cli);
    const input = JSON.parse(mock.commandCalls(CreateScheduleCommand)[0]!.args[0].input.Target!.Input!) as Record<string, unknown>;

    // What EventBridge Scheduler will deliver to the ops Lambda.
    const handler = createOpsHandler(async () => deps, silentLogger);
    const response = await handler(input, {
      awsRequestId: 'req-scheduled-1',
      invokedFunctionArn: schedulerConfig().scheduler.opsFunctionArn!,
    });

    expect(response).toMatchObject({ ok: true, result: { replayed: 1 } });
    const [audit] =
      await db.sql`select actor, reason, source, request_id, inbox_ids from integration.operator_audit where action = 'replay' and not dry_run`;
    expect(audit).toEqual({
      actor: 'alice',
      reason: 'later',
      source: 'schedule',
      request_id: 'req-scheduled-1',
      inbox_ids: [row!.inbox_id],
    });
    expect(await db.sql`select ran_request_id from integration.scheduled_replay`).toEqual([{ ran_request_id: 'req-scheduled-1' }]);
  });

  it('refuses a time in the past, a missing reason and a bad selection, and creates nothing', async () => {
    await opsError(
      runCommand(deps, { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-03T08:59:59Z', reason: 'x' }, cli),
      'BAD_ARGUMENTS',
    );
    await opsError(
      runCommand(deps, { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z' }, cli),
      'REASON_REQUIRED',
    );
    await opsError(
      runCommand(deps, { command: 'schedule-replay', consumer: 'nobody', at: '2026-07-04T00:00:00Z', reason: 'x' }, cli),
      'UNKNOWN_CONSUMER',
    );
    await opsError(
      runCommand(deps, { command: 'schedule-replay', consumer: 'case-projection', at: 'tomorrow', reason: 'x' }, cli),
      'BAD_ARGUMENTS',
    );
    expect(mock.calls()).toHaveLength(0);
  });

  it('refuses a schedule name outside ops-replay-*, the only names the ops role may create', async () => {
    const error = await opsError(
      runCommand(
        deps,
        { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z', reason: 'x', name: 'night-replay' },
        cli,
      ),
      'BAD_ARGUMENTS',
    );
    expect(error.message).toContain('ops-replay-');
    expect(mock.calls()).toHaveLength(0);
  });
});

describe('run-scheduled-replay: at most once', () => {
  const handler = createOpsHandler(async () => deps, silentLogger);
  // What a one-time schedule does: a direct Invoke, answered as the ops response itself.
  const invoke = (input: unknown, requestId: string) =>
    handler(input, { awsRequestId: requestId, invokedFunctionArn: schedulerConfig().scheduler.opsFunctionArn! }) as Promise<OpsResponse>;
  // What an operator does: a request to its function URL, signed as an operator's role.
  const urlHandler = createOpsHandler(async () => deps, silentLogger, { operatorPrincipals: [OPERATOR_ROLE] });
  const invokeUrl = async (body: Record<string, unknown>, requestId: string): Promise<OpsResponse> => {
    const response = await urlHandler(functionUrlRequest(body, OPERATOR_SESSION), {
      awsRequestId: requestId,
      invokedFunctionArn: schedulerConfig().scheduler.opsFunctionArn!,
    });
    return JSON.parse((response as { body: string }).body) as OpsResponse;
  };
  const replayAudits = () =>
    db.sql`select action, source, request_id, affected_count, inbox_ids, outcome from integration.operator_audit
           where action in ('replay', 'scheduled-replay-refused') order by created_at, action`;

  /** Two quarantined rows and a replay of them scheduled for a moment already past. */
  async function scheduled(): Promise<{ input: { command: string; replayId: string }; ids: string[] }> {
    const rows = await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
    ]);
    mock.on(CreateScheduleCommand).resolves({});
    await runCommand(
      deps,
      { command: 'schedule-replay', consumer: 'case-projection', at: '2026-07-04T00:00:00Z', reason: 'after the fix' },
      cli,
    );
    const input = JSON.parse(mock.commandCalls(CreateScheduleCommand).at(-1)!.args[0].input.Target!.Input!) as {
      command: string;
      replayId: string;
    };
    return { input, ids: rows.map((r) => r.inbox_id) };
  }

  it('replays once when the same input is invoked twice, and refuses the second with an audit row', async () => {
    const { input, ids } = await scheduled();

    const first = await invoke(input, 'req-1');
    // The rows fail again and are quarantined once more before the duplicate delivery.
    await db.sql`update integration.consumer_inbox set status = 'QUARANTINED', error_code = 'DB_TRANSIENT', quarantined_at = now(), next_attempt_at = null`;
    const second = await invoke(input, 'req-2');

    expect(first).toMatchObject({ ok: true, result: { replayId: input.replayId, replayed: 2 } });
    expect(second).toMatchObject({ ok: false, error: { code: 'REPLAY_REFUSED', details: { refused: 'already-ran' } } });
    expect(await db.sql`select status from integration.consumer_inbox`).toEqual([{ status: 'QUARANTINED' }, { status: 'QUARANTINED' }]);
    expect(await replayAudits()).toEqual([
      {
        action: 'replay',
        source: 'schedule',
        request_id: 'req-1',
        affected_count: 2,
        inbox_ids: expect.arrayContaining(ids),
        outcome: expect.any(Object),
      },
      {
        action: 'scheduled-replay-refused',
        source: 'lambda',
        request_id: 'req-2',
        affected_count: 0,
        inbox_ids: [],
        outcome: expect.objectContaining({ refused: 'already-ran' }),
      },
    ]);
  });

  it('replays once when two deliveries of the same input run at the same time', async () => {
    const { input } = await scheduled();

    const answers = await Promise.all([invoke(input, 'req-a'), invoke(input, 'req-b')]);

    expect(answers.filter((a) => a.ok)).toHaveLength(1);
    expect(answers.filter((a) => !a.ok)).toEqual([expect.objectContaining({ error: expect.objectContaining({ code: 'REPLAY_REFUSED' }) })]);
    const audits = await replayAudits();
    expect(audits.map((a) => a.action).sort()).toEqual(['replay', 'scheduled-replay-refused']);
    expect(audits.find((a) => a.action === 'replay')).toMatchObject({ affected_count: 2 });
  });

  it('refuses an id that names no scheduled replay, changes nothing and audits the refusal', async () => {
    await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);
    const before = await db.sql`select * from integration.consumer_inbox`;

    const answer = await invoke({ command: 'run-scheduled-replay', replayId: '00000000-0000-4000-8000-000000000000' }, 'req-forged');

    expect(answer).toMatchObject({ ok: false, error: { code: 'REPLAY_REFUSED', details: { refused: 'unknown' } } });
    expect(await db.sql`select * from integration.consumer_inbox`).toEqual(before);
    expect(await replayAudits()).toEqual([
      {
        action: 'scheduled-replay-refused',
        source: 'lambda',
        request_id: 'req-forged',
        affected_count: 0,
        inbox_ids: [],
        outcome: { refused: 'unknown' },
      },
    ]);
  });

  it('refuses a replay that is not due yet', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);
    mock.on(CreateScheduleCommand).resolves({});
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
    const later = opsDeps(db.as(DatabaseRoles.ops), { scheduler });
    const { replayId } = (await runCommand(
      later,
      { command: 'schedule-replay', ids: [row!.inbox_id], at: tomorrow, reason: 'tomorrow' },
      cli,
    )) as { replayId: string };

    const answer = await invoke({ command: 'run-scheduled-replay', replayId }, 'req-early');

    expect(answer).toMatchObject({ ok: false, error: { code: 'REPLAY_REFUSED', details: { refused: 'not-yet-due' } } });
    expect(await db.sql`select status from integration.consumer_inbox`).toEqual([{ status: 'QUARANTINED' }]);
    expect(await db.sql`select ran_at from integration.scheduled_replay`).toEqual([{ ran_at: null }]);
  });

  it('takes nothing from the event: a replay claiming source schedule is refused as an unknown argument', async () => {
    await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);

    const direct = await invoke(
      { command: 'replay', consumer: 'case-projection', reason: 'x', actor: 'mallory', source: 'schedule' },
      'req-x',
    );
    const viaUrl = await invokeUrl(
      { command: 'replay', consumer: 'case-projection', reason: 'x', source: 'schedule', apply: true },
      'req-y',
    );

    expect(direct).toMatchObject({ ok: false, error: { code: 'FUNCTION_URL_REQUIRED' } });
    expect(viaUrl).toMatchObject({ ok: false, error: { code: 'BAD_ARGUMENTS', message: expect.stringContaining('source') } });
    expect(await db.sql`select status from integration.consumer_inbox`).toEqual([{ status: 'QUARANTINED' }]);
  });

  it('records the Lambda request id of a replay run through the ops function', async () => {
    await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);

    const answer = await invokeUrl({ command: 'replay', consumer: 'case-projection', reason: 'fixed', apply: true }, 'req-replay-7');

    expect(answer).toMatchObject({ ok: true });
    expect(await db.sql`select source, actor, request_id from integration.operator_audit where action = 'replay' and not dry_run`).toEqual([
      { source: 'lambda', actor: OPERATOR_SESSION, request_id: 'req-replay-7' },
    ]);
  });
});
