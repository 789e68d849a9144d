/**
 * What the scheduled functions share: one schedule group, one scheduler role (so that the
 * ops function can pass exactly that role when it updates a schedule), and one encrypted
 * dead-letter queue for invocations the scheduler could not deliver.
 */
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { LambdaInvoke } from 'aws-cdk-lib/aws-scheduler-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { acknowledge, arnFinding } from './nag';

export class Schedules extends Construct {
  readonly group: scheduler.ScheduleGroup;
  readonly role: iam.Role;
  readonly deadLetterQueue: sqs.Queue;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.group = new scheduler.ScheduleGroup(this, 'Group', {});
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com'),
      description: 'EventBridge Scheduler: invokes the inbox worker and reaper functions',
    });
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetters', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    acknowledge(this.deadLetterQueue, [
      { id: 'AwsSolutions-SQS3', reason: 'This queue is the dead-letter queue of the schedules; a DLQ has no DLQ of its own.' },
    ]);
  }

  /**
   * Invoke a function on a rate. Retries are few and events short-lived: a missed tick is
   * replaced by the next one a minute later, and the DLQ records that it happened.
   */
  schedule(scope: Construct, id: string, fn: lambda.IFunction, rate: Duration, description: string): scheduler.Schedule {
    acknowledge(this.role, [
      {
        id: 'AwsSolutions-IAM5',
        reason: 'The scheduler target grant (LambdaInvoke) covers the function and its versions (function-arn:*); the role can invoke nothing else.',
        findings: [arnFinding(fn, ':*')],
      },
    ]);
    return new scheduler.Schedule(scope, id, {
      schedule: scheduler.ScheduleExpression.rate(rate),
      scheduleGroup: this.group,
      description,
      target: new LambdaInvoke(fn, {
        role: this.role,
        deadLetterQueue: this.deadLetterQueue,
        retryAttempts: 2,
        maxEventAge: Duration.minutes(2),
        input: scheduler.ScheduleTargetInput.fromObject({ source: 'schedule' }),
      }),
    });
  }
}
