/**
 * What the scheduled functions share: one schedule group, one scheduler role for the
 * recurring schedules (so that the ops function can pass exactly that role when it updates
 * a schedule), one encrypted dead-letter queue for invocations the scheduler could not
 * deliver, and one for asynchronous invocations that failed or expired in Lambda.
 *
 * Every function invoked asynchronously — by Scheduler, by a wake-up, by a one-time replay
 * schedule — has the same asynchronous invocation config: no retry (the next tick, the next
 * ingest batch, or the operator runs it again; a replay must never run twice), no event
 * older than a minute (a schedule's tick is replaced by the next one), and the event of a
 * failed invocation kept in a queue with an alarm (README, "Runbook: Failed invocations").
 */
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { LambdaInvoke } from 'aws-cdk-lib/aws-scheduler-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { acknowledge, arnFinding } from './nag';

/** The oldest asynchronous event any function accepts: Lambda's minimum, and no longer than any schedule's interval. */
export const ASYNC_MAX_EVENT_AGE = Duration.seconds(60);

export class Schedules extends Construct {
  readonly group: scheduler.ScheduleGroup;
  readonly role: iam.Role;
  /** Invocations EventBridge Scheduler could not deliver to Lambda. */
  readonly deadLetterQueue: sqs.Queue;
  /** Asynchronous invocations Lambda ran and saw fail, or dropped for their age. */
  readonly failedInvocations: sqs.Queue;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.group = new scheduler.ScheduleGroup(this, 'Group', {});
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com'),
      description: 'EventBridge Scheduler: invokes the inbox workers, the reaper and the relay on their schedules',
    });
    this.deadLetterQueue = this.queue('DeadLetters', 'the dead-letter queue of the schedules');
    this.failedInvocations = this.queue('FailedInvocations', "the on-failure destination of the functions' asynchronous invocations");
  }

  private queue(id: string, what: string): sqs.Queue {
    const queue = new sqs.Queue(this, id, {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    acknowledge(queue, [{ id: 'AwsSolutions-SQS3', reason: `This queue is ${what}: a queue of failures has no DLQ of its own.` }]);
    return queue;
  }

  /** The asynchronous invocation config of every function invoked asynchronously (see the module comment). */
  invokedAsynchronously(fn: lambda.Function): void {
    fn.configureAsyncInvoke({
      retryAttempts: 0,
      maxEventAge: ASYNC_MAX_EVENT_AGE,
      onFailure: new destinations.SqsDestination(this.failedInvocations),
    });
  }

  /**
   * Invoke a function on a rate. Scheduler's own retries are few and its events short-lived
   * (they cover a failed delivery, not a failed invocation): a missed tick is replaced by the
   * next one a minute later, and the DLQ records that it happened.
   */
  schedule(scope: Construct, id: string, fn: lambda.Function, rate: Duration, description: string): scheduler.Schedule {
    this.invokedAsynchronously(fn);
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
