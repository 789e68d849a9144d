/** `schedule-replay --at ISO …`: a one-time schedule that runs a replay later, then deletes itself. */
import { CreateScheduleCommand, type CreateScheduleCommandInput } from '@aws-sdk/client-scheduler';
import { z } from 'zod';
import { countQuarantined, inboxStatuses } from '../../inbox/quarantine-action';
import { caller, datetime, reasonText, REPLAY_SCHEDULE_PREFIX } from '../args';
import { actorOf, defineCommand, recordOrLog } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';
import { auditLine } from '../format';
import { actionSchema, checkSelection, selectionFields, selectionOf } from '../selection';

/** `at(yyyy-mm-ddThh:mm:ss)` in UTC, the one-time expression EventBridge Scheduler takes. */
export function atExpression(when: Date): string {
  return `at(${when.toISOString().slice(0, 19)})`;
}

/**
 * Create a one-time schedule that invokes the ops function with a replay at `at`. It is
 * deleted after it runs (ActionAfterCompletion DELETE). Scheduling is audited
 * (schedule-replay: who, why, when, what); the replay writes its own audit row when it
 * runs, with source 'schedule'. Retries are off: an audited operator action
 * runs once, and a failure shows in the ops function's errors rather than repeating.
 */
export const scheduleReplay = defineCommand({
  usage: `schedule-replay --at ISO (replay selection) --reason TEXT [--limit N] [--name ${REPLAY_SCHEDULE_PREFIX}NAME]
      a one-time schedule that runs the replay at --at through the ops function, then deletes itself`,
  schema: z
    .strictObject({
      ...caller,
      ...selectionFields,
      reason: reasonText.optional(),
      /** When to run: ISO-8601 with an offset; stored as at(…) in UTC. */
      at: datetime,
      /**
       * The schedule's name; generated when absent. The ops role may create schedules named
       * ops-replay-* only (cdk/constructs/ops.ts), so any other name would fail in AWS.
       */
      name: z
        .string()
        .regex(/^[0-9a-zA-Z-_.]{1,64}$/, 'letters, digits, - _ . only, at most 64 characters')
        .startsWith(REPLAY_SCHEDULE_PREFIX, `must start with ${REPLAY_SCHEDULE_PREFIX}`)
        .optional(),
    })
    .superRefine(checkSelection),

  async run(deps, args, inv) {
    const { schedulerRoleArn, groupName } = deps.config.scheduler;
    // In AWS the ops function targets itself (its ARN comes from the invocation context: an
    // ARN in its own environment would be a circular reference in the template); the CLI
    // needs OPS_FUNCTION_ARN.
    const opsFunctionArn = deps.config.scheduler.opsFunctionArn ?? inv.invokedFunctionArn;
    if (opsFunctionArn === undefined || schedulerRoleArn === undefined) {
      throw new OpsError(
        OpsErrorCodes.NOT_CONFIGURED,
        'schedule-replay needs SCHEDULER_ROLE_ARN, and OPS_FUNCTION_ARN when not run by the ops function',
      );
    }
    const selection = selectionOf(deps, args);
    if (args.reason === undefined) {
      throw new OpsError(OpsErrorCodes.REASON_REQUIRED, 'a scheduled replay needs a reason (it is recorded in the audit trail)');
    }
    const actor = actorOf(args, inv);
    const when = new Date(args.at);
    const now = (deps.now ?? (() => new Date()))();
    if (when.getTime() <= now.getTime()) {
      throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, `at: ${when.toISOString()} is not in the future`);
    }
    const input = {
      command: 'replay',
      source: 'schedule',
      actor,
      reason: args.reason,
      limit: args.limit,
      ...(args.ids !== undefined
        ? { ids: args.ids }
        : {
            consumer: args.consumer,
            ...(args.errorCode !== undefined ? { errorCode: args.errorCode } : {}),
            ...(args.eventType !== undefined ? { eventType: args.eventType } : {}),
            ...(args.from !== undefined ? { from: args.from } : {}),
            ...(args.to !== undefined ? { to: args.to } : {}),
          }),
    };
    // The schedule fires once, unattended: make sure now that the replay will accept its input.
    const { command: _replay, ...replayArgs } = input;
    actionSchema.parse(replayArgs);
    const stamp = when.toISOString().replace(/[-:]/g, '').slice(0, 15);
    const subject = 'inboxIds' in selection ? 'ids' : selection.consumerName.replace(/[^0-9a-zA-Z-_.]/g, '-');
    const name = args.name ?? `${REPLAY_SCHEDULE_PREFIX}${subject}-${stamp}-${Math.random().toString(36).slice(2, 8)}`.slice(0, 64);
    const command: CreateScheduleCommandInput = {
      Name: name,
      ...(groupName !== undefined ? { GroupName: groupName } : {}),
      ScheduleExpression: atExpression(when),
      ScheduleExpressionTimezone: 'UTC',
      Description: `ops replay by ${actor}: ${args.reason}`.slice(0, 512),
      State: 'ENABLED',
      FlexibleTimeWindow: { Mode: 'OFF' },
      ActionAfterCompletion: 'DELETE',
      Target: {
        Arn: opsFunctionArn,
        RoleArn: schedulerRoleArn,
        Input: JSON.stringify(input),
        RetryPolicy: { MaximumRetryAttempts: 0 },
      },
    };
    const matchingNow = await countQuarantined(deps.sql, selection);
    const out = await deps.scheduler.send(new CreateScheduleCommand(command));
    const auditId = await recordOrLog(deps, {
      action: 'schedule-replay',
      actor,
      reason: args.reason,
      source: args.source ?? inv.source,
      dryRun: false,
      consumerNames:
        'inboxIds' in selection ? (await inboxStatuses(deps.sql, selection.inboxIds)).map((r) => r.consumer_name) : [selection.consumerName],
      request: { at: when.toISOString(), schedule: name, replay: replayArgs },
      affectedCount: 1,
      outcome: { scheduleArn: out.ScheduleArn ?? null, expression: command.ScheduleExpression, matchingNow },
    });
    deps.logger?.info('ops_schedule_replay', { schedule: name, at: when.toISOString(), actor, matchingNow, auditId });
    return {
      auditId,
      schedule: name,
      groupName: groupName ?? 'default',
      scheduleArn: out.ScheduleArn ?? null,
      expression: command.ScheduleExpression!,
      input,
      matchingNow,
    };
  },

  format: (r) =>
    [
      `created schedule ${r.groupName}/${r.schedule}: ${r.expression} UTC, deleted after it runs`,
      `rows matching now: ${r.matchingNow} (the replay selects again when it runs, up to ${r.input.limit})`,
      auditLine(r.auditId),
    ].join('\n'),
});
