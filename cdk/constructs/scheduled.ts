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
 * failed invocation kept in a queue with an alarm (docs/runbooks.md, "Runbook: Failed invocations").
 */
import { ArnFormat, Duration, Stack, Tags } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as destinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { LambdaInvoke } from 'aws-cdk-lib/aws-scheduler-targets';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { acknowledge, arnFinding, resourceFinding } from './nag';

/** The oldest asynchronous event any function accepts: Lambda's minimum, and no longer than any schedule's interval. */
export const ASYNC_MAX_EVENT_AGE = Duration.seconds(60);

/** The tag a function carries when the stage's schedules may invoke it (value: the stage id, `<prefix>-<stage>`). */
export const SCHEDULED_TAG = 'kafka-inbox:scheduled';

/** A worker's schedule is named for its consumer, so that ops finds it without being told (docs/ops.md). */
export const WORKER_SCHEDULE_PREFIX = 'worker-';
export function workerScheduleName(consumer: string): string {
  return `${WORKER_SCHEDULE_PREFIX}${consumer}`;
}

/** An emitting consumer's relay schedule, in the stage's schedule group. */
export function relayScheduleName(consumer: string): string {
  return `relay-${consumer}`;
}

/** What a schedule and an asynchronous invocation config need: created by the platform stack, imported by the consumer stacks. */
export interface ScheduleParts {
  group: scheduler.IScheduleGroup;
  role: iam.IRole;
  /** Invocations EventBridge Scheduler could not deliver to Lambda. */
  deadLetterQueue: sqs.IQueue;
  /** Asynchronous invocations Lambda ran and saw fail, or dropped for their age. */
  failedInvocations: sqs.IQueue;
}

export abstract class ScheduleSupport extends Construct implements ScheduleParts {
  abstract readonly group: scheduler.IScheduleGroup;
  abstract readonly role: iam.IRole;
  abstract readonly deadLetterQueue: sqs.IQueue;
  abstract readonly failedInvocations: sqs.IQueue;

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
  schedule(
    scope: Construct,
    id: string,
    fn: lambda.Function,
    rate: Duration,
    description: string,
    scheduleName?: string,
  ): scheduler.Schedule {
    this.invokedAsynchronously(fn);
    return new scheduler.Schedule(scope, id, {
      schedule: scheduler.ScheduleExpression.rate(rate),
      scheduleGroup: this.group,
      description,
      ...(scheduleName === undefined ? {} : { scheduleName }),
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

/** The stage's schedule group, role and queues: the platform stack's. */
export class Schedules extends ScheduleSupport {
  readonly group: scheduler.ScheduleGroup;
  readonly role: iam.Role;
  readonly deadLetterQueue: sqs.Queue;
  readonly failedInvocations: sqs.Queue;

  /** `stageId` is the value of SCHEDULED_TAG on the functions of other stacks the role may invoke. */
  constructor(scope: Construct, id: string, stageId: string) {
    super(scope, id);
    this.group = new scheduler.ScheduleGroup(this, 'Group', {});
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com'),
      description: 'EventBridge Scheduler: invokes the inbox workers, the reaper and the relay on their schedules',
    });
    this.deadLetterQueue = this.queue('DeadLetters', 'the dead-letter queue of the schedules');
    this.failedInvocations = this.queue('FailedInvocations', "the on-failure destination of the functions' asynchronous invocations");
    // The consumer stacks' workers: any function of the stage tagged as scheduled, so that a
    // consumer added in its own stack changes nothing here. Their schedules use this role
    // (imported, so their grants add nothing to it).
    const anyFunction = Stack.of(this).formatArn({
      service: 'lambda',
      resource: 'function',
      resourceName: '*',
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    this.role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [anyFunction],
        conditions: { StringEquals: { [`aws:ResourceTag/${SCHEDULED_TAG}`]: stageId } },
      }),
    );
    this.deadLetterQueue.grantSendMessages(this.role);
    acknowledge(this.role, [
      {
        id: 'AwsSolutions-IAM5',
        reason:
          "The workers live in the consumer stacks: the role invokes the functions that carry the stage's scheduled tag (aws:ResourceTag condition), and the platform's own scheduled functions and their versions (function-arn:*).",
        findings: [resourceFinding(this, anyFunction)],
      },
    ]);
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

  override schedule(
    scope: Construct,
    id: string,
    fn: lambda.Function,
    rate: Duration,
    description: string,
    scheduleName?: string,
  ): scheduler.Schedule {
    acknowledge(this.role, [
      {
        id: 'AwsSolutions-IAM5',
        reason:
          'The scheduler target grant (LambdaInvoke) covers the function and its versions (function-arn:*); the role can invoke nothing else.',
        findings: [arnFinding(fn, ':*')],
      },
    ]);
    return super.schedule(scope, id, fn, rate, description, scheduleName);
  }
}

/** The platform's schedule group, role and queues as a consumer stack sees them (by name and ARN, from SSM). */
export class ImportedSchedules extends ScheduleSupport {
  readonly group: scheduler.IScheduleGroup;
  readonly role: iam.IRole;
  readonly deadLetterQueue: sqs.IQueue;
  readonly failedInvocations: sqs.IQueue;

  constructor(
    scope: Construct,
    id: string,
    refs: { groupName: string; roleArn: string; deadLetterQueueArn: string; failedInvocationsQueueArn: string; stageId: string },
  ) {
    super(scope, id);
    this.group = scheduler.ScheduleGroup.fromScheduleGroupName(this, 'Group', refs.groupName);
    // Immutable: the role's own policy (tag condition) covers this stack's workers.
    this.role = iam.Role.fromRoleArn(this, 'Role', refs.roleArn, { mutable: false });
    this.deadLetterQueue = sqs.Queue.fromQueueArn(this, 'DeadLetters', refs.deadLetterQueueArn);
    this.failedInvocations = sqs.Queue.fromQueueArn(this, 'FailedInvocations', refs.failedInvocationsQueueArn);
    this.stageId = refs.stageId;
  }

  readonly stageId: string;

  /** A worker of this stack: tagged so that the platform's scheduler role may invoke it. */
  override schedule(
    scope: Construct,
    id: string,
    fn: lambda.Function,
    rate: Duration,
    description: string,
    scheduleName?: string,
  ): scheduler.Schedule {
    Tags.of(fn).add(SCHEDULED_TAG, this.stageId);
    return super.schedule(scope, id, fn, rate, description, scheduleName);
  }
}
