/** The reaper: releases expired leases, quarantines exhausted rows, prunes, publishes gauges. */
import { Duration } from 'aws-cdk-lib';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import { Construct } from 'constructs';
import type { StageConfig } from '../config';
import { DatabaseRoles } from '../../functions/lib/database-roles';
import type { ConsumerManifest } from '../../functions/framework/manifest';
import { platformEntry } from '../function-entries';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import type { Schedules } from './scheduled';

export interface ReaperProps {
  platform: FunctionPlatform;
  reaper: StageConfig['reaper'];
  worker: StageConfig['worker'];
  schedules: Schedules;
  /** The declared consumers' data, bundled: the consumers it serves. */
  manifest: ConsumerManifest;
}

export class Reaper extends Construct {
  readonly function: InboxFunction;
  readonly schedule: scheduler.Schedule;

  constructor(scope: Construct, id: string, props: ReaperProps) {
    super(scope, id);
    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: platformEntry('reaper', props.manifest),
      description: 'Kafka inbox reaper: expired leases, max attempts, pruning, gauges',
      timeout: Duration.seconds(props.reaper.timeoutSeconds),
      database: { role: DatabaseRoles.reaper },
      environment: {
        REAPER_BATCH_SIZE: String(props.reaper.batchSize),
        REAPER_SAFETY_MARGIN_MS: String(props.reaper.safetyMarginSeconds * 1000),
        REAPER_SESSION_BOUND_SECONDS: String(props.reaper.consumerSessionBoundSeconds),
        LEASE_SECONDS: String(props.worker.leaseSeconds),
      },
    });
    this.schedule = props.schedules.schedule(
      this,
      'Schedule',
      this.function,
      Duration.minutes(props.reaper.intervalMinutes),
      'Release expired leases, quarantine exhausted rows, prune, publish backlog gauges',
    );
  }
}
