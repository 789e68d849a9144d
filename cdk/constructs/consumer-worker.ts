/**
 * One consumer's worker: drains its due rows, invoked every minute by EventBridge
 * Scheduler. Inline consumers get one too: rows their ingest left RETRY_PENDING are
 * processed here.
 */
import { Duration } from 'aws-cdk-lib';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { Construct } from 'constructs';
import type { ConsumerStageConfig, StageConfig } from '../config';
import { DatabaseRoles } from '../../functions/lib/database-roles';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import type { Schedules } from './scheduled';

export interface ConsumerWorkerProps {
  platform: FunctionPlatform;
  consumer: ConsumerStageConfig;
  worker: StageConfig['worker'];
  schedules: Schedules;
}

export class ConsumerWorker extends Construct {
  readonly function: InboxFunction;
  readonly schedule: scheduler.Schedule;

  constructor(scope: Construct, id: string, props: ConsumerWorkerProps) {
    super(scope, id);
    const { consumer, worker } = props;
    // The stage config guarantees timeout + safety margin < lease: a live worker's rows
    // are never released by the reaper while it still runs.
    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: 'functions/worker/handler.ts',
      description: `Kafka inbox worker: ${consumer.name}`,
      memorySize: consumer.workerMemoryMb,
      timeout: Duration.seconds(consumer.workerTimeoutSeconds),
      database: { role: DatabaseRoles.worker },
      environment: {
        CONSUMER_NAME: consumer.name,
        WORKER_BATCH_SIZE: String(consumer.workerBatchSize),
        WORKER_SAFETY_MARGIN_MS: String(worker.safetyMarginSeconds * 1000),
        // No statement may outlast the margin the worker keeps before its deadline, so an
        // invocation ends on time even when a statement hangs (it fails as 57014, retryable).
        DB_STATEMENT_TIMEOUT_MS: String(worker.safetyMarginSeconds * 1000),
        LEASE_SECONDS: String(worker.leaseSeconds),
      },
    });
    this.schedule = props.schedules.schedule(this, 'Schedule', this.function, Duration.minutes(1), `Drain the ${consumer.name} inbox`);
  }
}
