/**
 * One consumer's worker: drains its due rows, invoked every minute by EventBridge
 * Scheduler (the safety net), by its ingest function when rows arrive and nobody is awake,
 * and by itself to fan out and hand over (docs/worker.md, "Wake-ups"). Inline consumers get
 * one too: rows their ingest left RECEIVED or RETRY_PENDING are processed here.
 */
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { Construct } from 'constructs';
import { reservedConcurrencyOf, type ConsumerStageConfig, type StageConfig } from '../config';
import { workerRoleOf } from '../../functions/lib/database-roles';
import { consumerEntry, sourceOf } from '../function-entries';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import { workerScheduleName, type ScheduleSupport } from './scheduled';

export interface ConsumerWorkerProps {
  platform: FunctionPlatform;
  consumer: ConsumerStageConfig;
  worker: StageConfig['worker'];
  schedules: ScheduleSupport;
}

export class ConsumerWorker extends Construct {
  readonly function: InboxFunction;
  readonly schedule: scheduler.Schedule;

  constructor(scope: Construct, id: string, props: ConsumerWorkerProps) {
    super(scope, id);
    const { consumer, worker } = props;
    const reserved = reservedConcurrencyOf(consumer);
    // The stage config guarantees timeout + safety margin < lease: a live worker's rows
    // are never released by the reaper while it still runs.
    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: consumerEntry('worker', consumer.name, sourceOf(consumer)),
      description: `Kafka inbox worker: ${consumer.name}`,
      memorySize: consumer.workerMemoryMb,
      timeout: Duration.seconds(consumer.workerTimeoutSeconds),
      database: { role: workerRoleOf(consumer) },
      ...(reserved !== undefined ? { reservedConcurrentExecutions: reserved } : {}),
      environment: {
        CONSUMER_NAME: consumer.name,
        WORKER_BATCH_SIZE: String(consumer.workerBatchSize),
        // At least the worker role's statement_timeout (the stage config checks it), so an
        // invocation ends on time even when a statement hangs (it fails as 57014, retryable).
        WORKER_SAFETY_MARGIN_MS: String(worker.safetyMarginSeconds * 1000),
        LEASE_SECONDS: String(worker.leaseSeconds),
        WORKER_MAX_CONCURRENCY: String(consumer.workerMaxConcurrency),
        WORKER_IDLE_MS: String(consumer.workerIdleSeconds * 1000),
        WAKE_UPS: String(consumer.wakeUps),
      },
    });
    // Every asynchronous invocation, the wake-ups' and the schedule's (Scheduler invokes
    // asynchronously), is configured by the schedule (scheduled.ts): a wake-up that Lambda
    // could not run at once is worth nothing a minute later (the schedule has run the worker
    // by then), and one that failed is not retried: the next ingest batch or tick wakes a
    // worker anyway.
    if (consumer.wakeUps) {
      // Fan-out and hand-over invoke the function itself, by the name Lambda gives it at run
      // time (AWS_LAMBDA_FUNCTION_NAME). A policy of its own, not the role's default policy:
      // the function waits for that one, and a statement naming the function's ARN in it
      // would make each wait for the other. The function's unqualified ARN only.
      new iam.Policy(this, 'InvokeItself', {
        roles: [this.function.role!],
        statements: [this.invokeStatement()],
      });
    }
    // Named for its consumer: ops finds it by that name (docs/ops.md).
    this.schedule = props.schedules.schedule(
      this,
      'Schedule',
      this.function,
      Duration.minutes(1),
      `Drain the ${consumer.name} inbox`,
      workerScheduleName(consumer.name),
    );
  }

  /**
   * Let an ingest function wake this worker: its name in the ingest's environment
   * (WORKER_FUNCTION_NAME), and lambda:InvokeFunction on this function's unqualified ARN
   * only. Not grantInvoke(): it also grants every version and alias (arn:…:*), which
   * nothing here invokes.
   */
  wakeableBy(ingest: InboxFunction): void {
    ingest.addEnvironment('WORKER_FUNCTION_NAME', this.function.functionName);
    ingest.addToRolePolicy(this.invokeStatement());
  }

  /** lambda:InvokeFunction on this function's unqualified ARN: what a wake-up, a fan-out or a hand-over needs. */
  private invokeStatement(): iam.PolicyStatement {
    return new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [this.function.functionArn] });
  }
}
