/**
 * The ops function: stats, quarantine summary, replay, poison listing and pause/resume of
 * a consumer's worker schedule. Pausing is an UpdateSchedule, which replaces the whole
 * schedule and therefore passes the scheduler role again: hence iam:PassRole on that role.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { Construct } from 'constructs';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import type { Schedules } from './scheduled';

export interface OpsProps {
  platform: FunctionPlatform;
  schedules: Schedules;
  /** Each consumer's worker schedule, by consumer name. */
  workerSchedules: Record<string, scheduler.ISchedule>;
}

export class Ops extends Construct {
  readonly function: InboxFunction;

  constructor(scope: Construct, id: string, props: OpsProps) {
    super(scope, id);
    const names = Object.fromEntries(Object.entries(props.workerSchedules).map(([consumer, s]) => [consumer, s.scheduleName]));
    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: 'functions/ops/handler.ts',
      description: 'Kafka inbox operator commands (stats, quarantine, replay, poison, pause/resume)',
      timeout: Duration.seconds(60),
      environment: {
        WORKER_SCHEDULES: Stack.of(this).toJsonString(names),
        SCHEDULE_GROUP_NAME: props.schedules.group.scheduleGroupName,
      },
    });
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['scheduler:GetSchedule', 'scheduler:UpdateSchedule', 'scheduler:CreateSchedule', 'scheduler:DeleteSchedule'],
        resources: Object.values(props.workerSchedules).map((s) => s.scheduleArn),
      }),
    );
    props.schedules.role.grantPassRole(this.function.grantPrincipal);
  }
}
