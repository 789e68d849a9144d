/** `schedule-replay --at ISO …`: a replay recorded now, run later by a one-time schedule that then deletes itself. */
import { randomUUID } from 'node:crypto';
import { CreateScheduleCommand, type CreateScheduleCommandInput } from '@aws-sdk/client-scheduler';
import { z } from 'zod';
import { recordOperatorAction } from '../queries/operator-audit';
import { countQuarantined, inboxStatuses, type QuarantineSelection } from '../queries/quarantine-action';
import { createScheduledReplay } from '../queries/scheduled-replay';
import { caller, datetime, reasonText, REPLAY_SCHEDULE_PREFIX } from '../args';
import { actorOf, defineCommand, type Invocation, type OpsDeps } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';
import { auditLine } from '../format';
import { checkSelection, selectionFields, selectionOf } from '../selection';

/** `at(yyyy-mm-ddThh:mm:ss)` in UTC, the one-time expression EventBridge Scheduler takes. */
export function atExpression(when: Date): string {
  return `at(${when.toISOString().slice(0, 19)})`;
}

/** A schedule name for a replay at `when`: the prefix the ops role may create, what it replays, when, and a random tail. */
function generatedName(selection: QuarantineSelection, when: Date): string {
  const stamp = when.toISOString().replace(/[-:]/g, '').slice(0, 15);
  const subject = 'inboxIds' in selection ? 'ids' : selection.consumerName.replace(/[^0-9a-zA-Z-_.]/g, '-');
  return `${REPLAY_SCHEDULE_PREFIX}${subject}-${stamp}-${Math.random().toString(36).slice(2, 8)}`.slice(0, 64);
}

/** The one-time schedule: at `when` (UTC), the ops function invoked with `input` once (no retries), deleted after it runs. */
function replaySchedule(s: {
  name: string;
  groupName: string | undefined;
  when: Date;
  replayId: string;
  actor: string;
  opsFunctionArn: string;
  schedulerRoleArn: string;
  input: { command: string; replayId: string };
}): CreateScheduleCommandInput {
  return {
    Name: s.name,
    ...(s.groupName !== undefined ? { GroupName: s.groupName } : {}),
    ScheduleExpression: atExpression(s.when),
    ScheduleExpressionTimezone: 'UTC',
    Description: `ops replay ${s.replayId} by ${s.actor}`.slice(0, 512),
    State: 'ENABLED',
    FlexibleTimeWindow: { Mode: 'OFF' },
    ActionAfterCompletion: 'DELETE',
    Target: {
      Arn: s.opsFunctionArn,
      RoleArn: s.schedulerRoleArn,
      Input: JSON.stringify(s.input),
      RetryPolicy: { MaximumRetryAttempts: 0 },
    },
  };
}

/**
 * The replay's row and its schedule-replay audit row, in one transaction; resolves to the
 * audit id. The schedule exists already: when the database refuses, the command fails
 * PARTIALLY_APPLIED and the log carries what it would have recorded.
 */
async function recordReplay(
  deps: OpsDeps,
  inv: Invocation,
  r: {
    replayId: string;
    name: string;
    groupName: string | undefined;
    when: Date;
    selection: QuarantineSelection;
    limit: number;
    actor: string;
    reason: string;
    request: Record<string, unknown>;
    outcome: Record<string, unknown>;
  },
): Promise<string> {
  const consumerNames =
    'inboxIds' in r.selection
      ? (await inboxStatuses(deps.sql, r.selection.inboxIds)).map((x) => x.consumer_name)
      : [r.selection.consumerName];
  try {
    return await deps.sql.begin(async (tx) => {
      const audit = await recordOperatorAction(tx, {
        action: 'schedule-replay',
        actor: r.actor,
        reason: r.reason,
        source: inv.source,
        requestId: inv.requestId ?? null,
        dryRun: false,
        consumerNames,
        request: r.request,
        affectedCount: 1,
        outcome: r.outcome,
      });
      await createScheduledReplay(tx, {
        replayId: r.replayId,
        scheduleName: r.name,
        runAt: r.when,
        selection: r.selection,
        limit: r.limit,
        actor: r.actor,
        reason: r.reason,
        createdAuditId: audit.audit_id,
      });
      return audit.audit_id;
    });
  } catch (error) {
    deps.logger?.error('ops_audit_unwritten', {
      action: 'schedule-replay',
      actor: r.actor,
      request: r.request,
      error: error instanceof Error ? error.name : 'unknown',
    });
    throw new OpsError(
      OpsErrorCodes.PARTIALLY_APPLIED,
      `schedule ${r.groupName ?? 'default'}/${r.name} was created, but the database could not record replay ${r.replayId}: ` +
        'the schedule will be refused when it fires (nothing is replayed). Schedule the replay again.',
      { schedule: r.name, replayId: r.replayId },
    );
  }
}

/**
 * Record a replay to run at `at`, and create the one-time schedule that runs it: the
 * schedule invokes the ops function with `{ command: 'run-scheduled-replay', replayId }`
 * and nothing else, and is deleted after it runs (ActionAfterCompletion DELETE). What to
 * replay, who asked and why are the database row's (integration.scheduled_replay), written
 * in the transaction of the schedule-replay audit row; run-scheduled-replay runs it at most
 * once. The schedule is created first, under the id the row will have: if the database
 * then refuses the row, the schedule names a replay nobody recorded, and is refused (and
 * audited) when it fires. Retries are off: a failure shows in the ops function's alarms
 * rather than repeating.
 */
export const scheduleReplay = defineCommand({
  usage: `schedule-replay --at ISO (replay selection) --reason TEXT [--limit N] [--name ${REPLAY_SCHEDULE_PREFIX}NAME]
      record a replay and a one-time schedule that runs it at --at through the ops function, once, then deletes itself`,
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

  changes: 'always',
  async run(deps, args, inv) {
    const { schedulerRoleArn, groupName } = deps.config.scheduler;
    // In AWS the ops function targets itself (its ARN comes from the invocation context: an
    // ARN in its own environment would be a circular reference); the CLI needs OPS_FUNCTION_ARN.
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
    const replayId = randomUUID();
    const input = { command: 'run-scheduled-replay', replayId };
    const name = args.name ?? generatedName(selection, when);
    const command = replaySchedule({ name, groupName, when, replayId, actor, opsFunctionArn, schedulerRoleArn, input });
    const matchingNow = await countQuarantined(deps.sql, selection);
    const out = await deps.scheduler.send(new CreateScheduleCommand(command));
    const request = { at: when.toISOString(), schedule: name, replayId, selection, limit: args.limit };
    const auditId = await recordReplay(deps, inv, {
      replayId,
      name,
      groupName,
      when,
      selection,
      limit: args.limit,
      actor,
      reason: args.reason,
      request,
      outcome: { scheduleArn: out.ScheduleArn ?? null, expression: command.ScheduleExpression, matchingNow },
    });
    deps.logger?.info('ops_schedule_replay', { schedule: name, replayId, at: when.toISOString(), actor, matchingNow, auditId });
    return {
      auditId,
      replayId,
      schedule: name,
      groupName: groupName ?? 'default',
      scheduleArn: out.ScheduleArn ?? null,
      expression: command.ScheduleExpression!,
      input,
      limit: args.limit,
      matchingNow,
    };
  },

  format: (r) =>
    [
      `created schedule ${r.groupName}/${r.schedule}: ${r.expression} UTC, deleted after it runs`,
      `replay ${r.replayId}: rows matching now: ${r.matchingNow} (the replay selects again when it runs, up to ${r.limit}; it runs once)`,
      auditLine(r.auditId),
    ].join('\n'),
});
