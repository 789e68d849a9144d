/**
 * The platform stack: what every consumer of the stage shares and what runs once per stage.
 * The on-failure bucket, the schedule group with its role and failure queues, the alarm
 * topic; the reaper, the ops function and the migration trigger; the
 * overview dashboard (totals and worst consumers, by SEARCH) and the alarms of what it runs
 * and of the database. The consumers themselves are in the consumer stacks
 * (consumer-stack.ts), which read what they need of this one from SSM parameters
 * (platform-references.ts): adding a consumer changes nothing here.
 *
 * Its stack name stays `<prefix>-<stage>-stateless`, the stack the consumers lived in
 * before there were consumer stacks: renaming it would leave the old stack, its retained
 * bucket and its mappings behind (and a consumer group cannot belong to two mappings).
 */
import { CfnOutput, type CfnResource, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { acknowledge } from '../constructs/nag';
import type { FunctionPlatform } from '../constructs/inbox-function';
import type { StageConfig } from '../config';
import { InboxAlarms, type ScheduledFunction } from '../constructs/alarms';
import { OverviewDashboard } from '../constructs/dashboard';
import { Migrations } from '../constructs/migrations';
import { InboxMetrics, type MonitoredFunction } from '../constructs/monitoring';
import { Ops } from '../constructs/ops';
import { OperatorAccess } from '../constructs/operators';
import { Reaper } from '../constructs/reaper';
import { acknowledgeLogRetentionProvider, retainDefaultLogGroup } from '../constructs/log-retention';
import { Schedules } from '../constructs/scheduled';
import { functionPlatformOf } from './consumer-stack';
import { consumerDirectoryPath, stageIdOf, writePlatformParameters } from './platform-references';
import { StatefulReferences } from './stage-references';

export interface PlatformStackProps extends StackProps {
  config: StageConfig;
}

export class PlatformStack extends Stack {
  readonly alarmTopic: sns.ITopic;
  readonly failedRecords: s3.Bucket;
  readonly schedules: Schedules;
  readonly ops: Ops;
  readonly reaper: Reaper;
  readonly dashboard: OverviewDashboard;
  readonly alarms: InboxAlarms;

  constructor(scope: Construct, id: string, props: PlatformStackProps) {
    super(scope, id, props);
    const { config } = props;
    const stageId = stageIdOf(config);

    // The stateful stack's resources, through its SSM parameters: no export ties the stacks.
    const stateful = new StatefulReferences(this, 'Stateful', config);
    const platform = functionPlatformOf(stateful, config);

    this.failedRecords = this.createFailedRecordsBucket(config);
    this.schedules = new Schedules(this, 'Schedules', stageId);
    this.reaper = new Reaper(this, 'Reaper', {
      platform,
      reaper: config.reaper,
      worker: config.worker,
      schedules: this.schedules,
      manifest: config.manifest,
    });
    // The outbox relays are per emitting consumer, in its consumer stack (consumer-stack.ts).
    this.ops = this.createOps(config, platform, stageId);
    new OperatorAccess(this, 'Operators', { operators: config.operators, connection: platform.database.connection });
    this.addMigrations(config, platform);

    this.alarmTopic = this.createAlarmTopic(config);
    writePlatformParameters(this, config, {
      failedRecordsBucketArn: this.failedRecords.bucketArn,
      scheduleGroupName: this.schedules.group.scheduleGroupName,
      schedulerRoleArn: this.schedules.role.roleArn,
      schedulesDeadLetterQueueArn: this.schedules.deadLetterQueue.queueArn,
      failedInvocationsQueueArn: this.schedules.failedInvocations.queueArn,
      alarmTopicArn: this.alarmTopic.topicArn,
    });

    const monitoring = this.createMonitoring(config, stateful, stageId);
    this.dashboard = monitoring.dashboard;
    this.alarms = monitoring.alarms;
  }

  /** Records the mappings gave up on, with their payloads: kept even if the stack goes. */
  private createFailedRecordsBucket(config: StageConfig): s3.Bucket {
    const bucket = new s3.Bucket(this, 'FailedRecords', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      // Versioned: a mapping's batch is the only copy of the records it gave up on, and every
      // ingest role may write under aws/lambda/ (cdk/constructs/kafka-ingest.ts): an object
      // overwritten keeps its earlier version for the retention.
      versioned: true,
      lifecycleRules: [
        {
          expiration: Duration.days(config.failedRecordsRetentionDays),
          noncurrentVersionExpiration: Duration.days(config.failedRecordsRetentionDays),
        },
        { expiredObjectDeleteMarker: true },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // The runbook ("ESM failed records") sends the operator here.
    new CfnOutput(this, 'FailedRecordsBucketName', {
      value: bucket.bucketName,
      description: 'On-failure bucket: records the event-source mappings gave up on',
    });
    acknowledge(bucket, [
      {
        id: 'AwsSolutions-S1',
        reason:
          'Only the event-source mappings write here, through the ingest roles; reads are operator actions recorded by CloudTrail. Server access logs would add a second bucket for no new information.',
      },
    ]);
    return bucket;
  }

  private createOps(config: StageConfig, platform: FunctionPlatform, stageId: string): Ops {
    const ops = new Ops(this, 'Ops', {
      platform,
      manifest: config.manifest,
      schedules: this.schedules,
      stageId,
      directoryPath: consumerDirectoryPath(config),
      failedRecords: this.failedRecords,
      operators: config.operators,
    });
    // The checklist's way to run ops commands where the database is reachable only in the VPC.
    new CfnOutput(this, 'OpsFunctionName', { value: ops.function.functionName, description: 'The ops function' });
    new CfnOutput(this, 'OpsFunctionUrl', {
      value: ops.url.url,
      description: 'The ops function URL (AWS_IAM): POST {"command":"stats"} signed as a declared operator (docs/ops.md)',
    });
    return ops;
  }

  /**
   * The migration trigger. The database and its proxy exist before this stack deploys (it
   * depends on the stateful one); the consumer stacks deploy after this one, so after the
   * migrations too.
   */
  private addMigrations(config: StageConfig, platform: FunctionPlatform): void {
    const migrations = new Migrations(this, 'Migrations', {
      platform,
      executeBefore: [this.reaper, this.ops],
      operators: config.operators.map((o) => o.name),
      manifest: config.manifest,
    });
    // The trigger's provider function (CDK's, one per stack) logs to the group Lambda creates.
    const triggerProvider = this.node.tryFindChild('AWSCDK.TriggerCustomResourceProviderCustomResourceProvider');
    const triggerHandler = triggerProvider?.node.tryFindChild('Handler') as CfnResource | undefined;
    if (triggerHandler === undefined) throw new Error(`no trigger provider next to ${migrations.trigger.node.path}`);
    retainDefaultLogGroup(this, 'TriggerProviderLogRetention', triggerHandler.ref, config.observability.logRetentionDays);
    acknowledgeLogRetentionProvider(this);
  }

  /** The overview dashboard and the alarms of what this stack runs and of the database. */
  private createMonitoring(
    config: StageConfig,
    stateful: StatefulReferences,
    stageId: string,
  ): { dashboard: OverviewDashboard; alarms: InboxAlarms } {
    const metrics = new InboxMetrics(config.observability.metricsNamespace, config.observability.serviceName);
    const functions: MonitoredFunction[] = [
      { label: 'reaper', function: this.reaper.function },
      { label: 'ops', function: this.ops.function },
    ];
    const scheduled: ScheduledFunction[] = [
      { label: 'reaper', function: this.reaper.function, intervalMinutes: config.reaper.intervalMinutes },
    ];
    const dashboard = new OverviewDashboard(this, 'Dashboard', { metrics, functions, cluster: stateful.cluster, stageId });
    const alarms = new InboxAlarms(this, 'Alarms', {
      metrics,
      consumers: [],
      functions,
      scheduled,
      failureQueues: [
        { label: "The schedules' dead-letter queue", queue: this.schedules.deadLetterQueue },
        { label: 'The failed-invocations queue', queue: this.schedules.failedInvocations },
      ],
      database: { cluster: stateful.cluster, config },
      thresholds: config.alarms,
      topic: this.alarmTopic,
    });
    return { dashboard, alarms };
  }

  private createAlarmTopic(config: StageConfig): sns.ITopic {
    if (config.alarms.snsTopicArn !== undefined) return sns.Topic.fromTopicArn(this, 'AlarmTopic', config.alarms.snsTopicArn);
    // CloudWatch must be allowed to use the key to publish to an encrypted topic.
    const key = new kms.Key(this, 'AlarmTopicKey', {
      enableKeyRotation: true,
      description: 'Kafka inbox alarm topic',
      removalPolicy: RemovalPolicy.DESTROY,
    });
    key.grant(new iam.ServicePrincipal('cloudwatch.amazonaws.com'), 'kms:Decrypt', 'kms:GenerateDataKey*');
    const topic = new sns.Topic(this, 'AlarmTopic', { masterKey: key, enforceSSL: true, displayName: 'Kafka inbox alarms' });
    if (config.alarms.email !== undefined) topic.addSubscription(new subscriptions.EmailSubscription(config.alarms.email));
    return topic;
  }
}
