/**
 * The ops function: the operator commands (functions/ops/commands/).
 *
 *   pause/resume       UpdateSchedule on the consumers' worker schedules (it replaces the whole
 *                      schedule, so it passes the schedules' role again: iam:PassRole on that
 *                      role, to Scheduler only); with --ingest, UpdateEventSourceMapping on the
 *                      ingest functions' own mappings; resume wakes the consumer's worker.
 *   schedule-replay    CreateSchedule of ops-replay-* schedules in the inbox's group, under a
 *                      role of their own that can invoke this function and nothing else.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { Construct } from 'constructs';
import { REPLAY_SCHEDULE_PREFIX } from '../../functions/ops/args';
import { DatabaseRoles } from '../../functions/lib/database-roles';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import { acknowledge, resourceFinding } from './nag';
import type { Schedules } from './scheduled';

export interface OpsConsumer {
  /** Its worker schedule (pause, resume). */
  schedule: scheduler.ISchedule;
  /** Its worker function (resume wakes it). */
  worker: lambda.IFunction;
  /** Its ingest function and that function's event-source mappings (pause, resume --ingest). */
  ingest: { function: lambda.IFunction; mappingIds: string[]; mappingArns: string[] };
}

export interface OpsProps {
  platform: FunctionPlatform;
  schedules: Schedules;
  /** Each consumer's schedule, functions and mappings, by consumer name. */
  consumers: Record<string, OpsConsumer>;
}

const SCHEDULER = 'scheduler.amazonaws.com';

export class Ops extends Construct {
  readonly function: InboxFunction;
  /** What one-time replay schedules run as: it may invoke the ops function, nothing else. */
  readonly replayRole: iam.Role;

  constructor(scope: Construct, id: string, props: OpsProps) {
    super(scope, id);
    const consumers = Object.entries(props.consumers);
    const byConsumer = <T>(f: (c: OpsConsumer) => T) => Stack.of(this).toJsonString(Object.fromEntries(consumers.map(([name, c]) => [name, f(c)])));
    this.replayRole = new iam.Role(this, 'ReplayRole', {
      assumedBy: new iam.ServicePrincipal(SCHEDULER),
      description: 'EventBridge Scheduler: runs the one-time replay schedules of ops schedule-replay (invokes the ops function only)',
    });
    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: 'functions/ops/handler.ts',
      description: 'Kafka inbox operator commands (stats, event, quarantine, replay, resolve, poison, pause/resume, audit)',
      timeout: Duration.seconds(60),
      database: { role: DatabaseRoles.ops },
      environment: {
        WORKER_SCHEDULES: byConsumer((c) => c.schedule.scheduleName),
        WORKER_FUNCTIONS: byConsumer((c) => c.worker.functionName),
        INGEST_MAPPINGS: byConsumer((c) => c.ingest.mappingIds),
        SCHEDULE_GROUP_NAME: props.schedules.group.scheduleGroupName,
        // schedule-replay: the one-time schedules invoke this function through this role.
        // The function's own ARN comes from its invocation context (in the environment it
        // would be a circular reference).
        SCHEDULER_ROLE_ARN: this.replayRole.roleArn,
      },
    });
    // The one-time replay schedules invoke it asynchronously.
    props.schedules.invokedAsynchronously(this.function);

    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['scheduler:GetSchedule', 'scheduler:UpdateSchedule'],
        resources: consumers.map(([, c]) => c.schedule.scheduleArn),
      }),
    );
    // pause/resume --ingest read a mapping's state and set Enabled. Both on the ingest
    // mappings' ARNs only; the update also only while the mapping belongs to an ingest
    // function (lambda:FunctionArn, which Lambda evaluates for Create/Update/Delete of a
    // mapping, not for Get).
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:GetEventSourceMapping'],
        resources: consumers.flatMap(([, c]) => c.ingest.mappingArns),
      }),
    );
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['lambda:UpdateEventSourceMapping'],
        resources: consumers.flatMap(([, c]) => c.ingest.mappingArns),
        conditions: { ArnEquals: { 'lambda:FunctionArn': consumers.map(([, c]) => c.ingest.function.functionArn) } },
      }),
    );
    // resume wakes the consumer's worker: its unqualified ARN, as its ingest's wake-ups do.
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: consumers.map(([, c]) => c.worker.functionArn) }),
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
    // The roles a schedule it writes runs as: the workers' schedules' (pause, resume) and the
    // replays' (schedule-replay); passed to EventBridge Scheduler and to no other service.
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['iam:PassRole'],
        resources: [props.schedules.role.roleArn, this.replayRole.roleArn],
        conditions: { StringEquals: { 'iam:PassedToService': SCHEDULER } },
      }),
    );
    // The replay role invokes this function, by its unqualified ARN (the schedules' target), and nothing else.
    this.replayRole.addToPolicy(new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [this.function.functionArn] }));
  }
}
