/**
 * The ops function: the operator commands (functions/ops/commands/). Pausing a worker is
 * an UpdateSchedule, which replaces the whole schedule and therefore passes the scheduler
 * role again: hence iam:PassRole on that role. Pausing ingest is an
 * UpdateEventSourceMapping on the consumers' own mappings, and on nothing else.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { Construct } from 'constructs';
import { REPLAY_SCHEDULE_PREFIX } from '../../functions/ops/args';
import { DatabaseRoles } from '../../functions/lib/database-roles';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import { acknowledge, arnFinding, resourceFinding } from './nag';
import type { Schedules } from './scheduled';

export interface OpsProps {
  platform: FunctionPlatform;
  schedules: Schedules;
  /** Each consumer's worker schedule, by consumer name. */
  workerSchedules: Record<string, scheduler.ISchedule>;
  /** Each consumer's ingest event-source mappings, by consumer name (ops pause/resume --ingest). */
  ingestMappings: Record<string, { ids: string[]; arns: string[] }>;
}

export class Ops extends Construct {
  readonly function: InboxFunction;

  constructor(scope: Construct, id: string, props: OpsProps) {
    super(scope, id);
    const names = Object.fromEntries(Object.entries(props.workerSchedules).map(([consumer, s]) => [consumer, s.scheduleName]));
    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: 'functions/ops/handler.ts',
      description: 'Kafka inbox operator commands (stats, event, quarantine, replay, resolve, poison, pause/resume, audit)',
      timeout: Duration.seconds(60),
      database: { role: DatabaseRoles.ops },
      environment: {
        WORKER_SCHEDULES: Stack.of(this).toJsonString(names),
        INGEST_MAPPINGS: Stack.of(this).toJsonString(
          Object.fromEntries(Object.entries(props.ingestMappings).map(([consumer, m]) => [consumer, m.ids])),
        ),
        SCHEDULE_GROUP_NAME: props.schedules.group.scheduleGroupName,
        // schedule-replay: the one-time schedules invoke this function through this role.
        // The function's own ARN comes from its invocation context (in the environment it
        // would be a circular reference).
        SCHEDULER_ROLE_ARN: props.schedules.role.roleArn,
      },
    });
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['scheduler:GetSchedule', 'scheduler:UpdateSchedule'],
        resources: Object.values(props.workerSchedules).map((s) => s.scheduleArn),
      }),
    );
    // pause/resume --ingest read a mapping's state and set Enabled, on these mappings only.
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping'],
        resources: Object.values(props.ingestMappings).flatMap((m) => m.arns),
      }),
    );
    // One-time replay schedules are named ops-replay-* in the inbox's group; nothing else.
    const replaySchedules = Stack.of(this).formatArn({
      service: 'scheduler',
      resource: 'schedule',
      resourceName: `${props.schedules.group.scheduleGroupName}/${REPLAY_SCHEDULE_PREFIX}*`,
    });
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        // Create only: the schedules delete themselves (ActionAfterCompletion DELETE, done by
        // the Scheduler service), and no ops command reads or deletes them.
        actions: ['scheduler:CreateSchedule'],
        resources: [replaySchedules],
      }),
    );
    acknowledge(this.function, [
      {
        id: 'AwsSolutions-IAM5',
        reason:
          'schedule-replay creates one-time schedules with generated names; the wildcard is limited to the ops-replay- prefix inside the inbox schedule group.',
        findings: [resourceFinding(this, replaySchedules)],
      },
    ]);
    props.schedules.role.grantPassRole(this.function.grantPrincipal);
    // The scheduler role invokes this function when a one-time replay fires.
    this.function.grantInvoke(props.schedules.role);
    acknowledge(props.schedules.role, [
      {
        id: 'AwsSolutions-IAM5',
        reason: 'The invoke grant covers the ops function and its versions (function-arn:*); the role can invoke nothing else.',
        findings: [arnFinding(this.function, ':*')],
      },
    ]);
  }
}
