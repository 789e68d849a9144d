/**
 * Everything that can be replaced at will: the functions, their event-source mappings and
 * schedules, the migration trigger, the dashboard and the alarms. One construct per
 * consumer declaration (functions/consumers/index.ts), nothing per consumer by hand.
 */
import { CfnOutput, type CfnResource, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import { Construct } from 'constructs';
import { acknowledge } from '../constructs/nag';
import type { ConsumerStageConfig, StageConfig } from '../config';
import { InboxAlarms, type ScheduledFunction } from '../constructs/alarms';
import { ConsumerWorker } from '../constructs/consumer-worker';
import { InboxDashboard } from '../constructs/dashboard';
import type { FunctionPlatform } from '../constructs/inbox-function';
import { KafkaIngest } from '../constructs/kafka-ingest';
import { Migrations } from '../constructs/migrations';
import { InboxMetrics, type MonitoredConsumer, type MonitoredFunction } from '../constructs/monitoring';
import { Ops } from '../constructs/ops';
import { OutboxRelay } from '../constructs/outbox-relay';
import { Reaper } from '../constructs/reaper';
import { acknowledgeLogRetentionProvider, retainDefaultLogGroup, retentionDays } from '../constructs/log-retention';
import { Schedules } from '../constructs/scheduled';
import { StatefulReferences } from './stage-references';

export interface StatelessStackProps extends StackProps {
  config: StageConfig;
}

/** A consumer's ingest and worker, under one construct named for the consumer. */
export class InboxConsumer extends Construct {
  readonly ingest: KafkaIngest;
  readonly worker: ConsumerWorker;

  constructor(
    scope: Construct,
    id: string,
    props: { platform: FunctionPlatform; consumer: ConsumerStageConfig; config: StageConfig; clusterArn: string; failedRecords: s3.IBucket; schedules: Schedules },
  ) {
    super(scope, id);
    this.ingest = new KafkaIngest(this, 'Ingest', {
      platform: props.platform,
      consumer: props.consumer,
      clusterArn: props.clusterArn,
      failedRecords: props.failedRecords,
    });
    this.worker = new ConsumerWorker(this, 'Worker', {
      platform: props.platform,
      consumer: props.consumer,
      worker: props.config.worker,
      schedules: props.schedules,
    });
    if (props.consumer.wakeUps) this.worker.wakeableBy(this.ingest.function);
  }
}

/** case-projection → CaseProjection */
export function constructIdOf(consumerName: string): string {
  return consumerName
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}

export class StatelessStack extends Stack {
  readonly consumers: InboxConsumer[] = [];
  readonly alarmTopic: sns.ITopic;
  readonly failedRecords: s3.Bucket;

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { config } = props;

    // The stateful stack's resources, through its SSM parameters: no export ties the stacks.
    const stateful = new StatefulReferences(this, 'Stateful', config);
    const platform: FunctionPlatform = {
      vpc: stateful.vpc,
      subnets: stateful.subnets,
      securityGroup: stateful.functionSecurityGroup,
      kafkaClientSecurityGroup: stateful.kafkaClientSecurityGroup,
      database: {
        cluster: stateful.cluster,
        masterSecret: stateful.masterSecret,
        databaseName: config.database.databaseName,
        connection: stateful.connection,
      },
      observability: { ...config.observability, logRetentionDays: retentionDays(config.observability.logRetentionDays) },
    };

    // Records the mappings gave up on, with their payloads: kept even if the stack goes.
    this.failedRecords = new s3.Bucket(this, 'FailedRecords', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      versioned: false,
      lifecycleRules: [{ expiration: Duration.days(config.failedRecordsRetentionDays) }],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // The runbook ("ESM failed records") sends the operator here.
    new CfnOutput(this, 'FailedRecordsBucketName', {
      value: this.failedRecords.bucketName,
      description: 'On-failure bucket: records the event-source mappings gave up on',
    });
    acknowledge(this.failedRecords, [
      {
        id: 'AwsSolutions-S1',
        reason: 'Only the event-source mappings write here, through the ingest roles; reads are operator actions recorded by CloudTrail. Server access logs would add a second bucket for no new information.',
      },
    ]);

    const schedules = new Schedules(this, 'Schedules');
    for (const consumer of config.consumers) {
      this.consumers.push(
        new InboxConsumer(this, constructIdOf(consumer.name), {
          platform,
          consumer,
          config,
          clusterArn: stateful.mskClusterArn,
          failedRecords: this.failedRecords,
          schedules,
        }),
      );
    }
    const reaper = new Reaper(this, 'Reaper', { platform, reaper: config.reaper, worker: config.worker, schedules });
    // Only when some deployed consumer emits events.
    const outboxTopics = [...new Set(config.consumers.flatMap((c) => c.outboxTopics))].sort();
    const relay =
      outboxTopics.length === 0
        ? undefined
        : new OutboxRelay(this, 'OutboxRelay', {
            platform,
            relay: config.relay,
            clusterArn: stateful.mskClusterArn,
            topics: outboxTopics,
            schedules,
            logRetentionDays: config.observability.logRetentionDays,
          });
    const ops = new Ops(this, 'Ops', {
      platform,
      schedules,
      consumers: Object.fromEntries(
        config.consumers.map((c, i) => {
          const { ingest, worker } = this.consumers[i]!;
          const mappings = { mappingIds: ingest.eventSourceMappingIds, mappingArns: ingest.eventSourceMappingArns };
          return [c.name, { schedule: worker.schedule, worker: worker.function, ingest: { function: ingest.function, ...mappings } }];
        }),
      ),
    });

    // The checklist's way to run ops commands where the database is reachable only in the VPC.
    new CfnOutput(this, 'OpsFunctionName', {
      value: ops.function.functionName,
      description: 'The ops function: aws lambda invoke --function-name <this> --payload \'{"command":"stats"}\'',
    });

    // The database and its proxy exist before this stack deploys (it depends on the stateful one).
    const migrations = new Migrations(this, 'Migrations', {
      platform,
      executeBefore: [...this.consumers, reaper, ops, ...(relay ? [relay] : [])],
    });
    // The trigger's provider function (CDK's, one per stack) logs to the group Lambda creates.
    const triggerProvider = this.node.tryFindChild('AWSCDK.TriggerCustomResourceProviderCustomResourceProvider');
    const triggerHandler = triggerProvider?.node.tryFindChild('Handler') as CfnResource | undefined;
    if (triggerHandler === undefined) throw new Error(`no trigger provider next to ${migrations.trigger.node.path}`);
    retainDefaultLogGroup(this, 'TriggerProviderLogRetention', triggerHandler.ref, config.observability.logRetentionDays);
    acknowledgeLogRetentionProvider(this);

    this.alarmTopic = this.createAlarmTopic(config);
    const metrics = new InboxMetrics(config.observability.metricsNamespace, config.observability.serviceName);
    const monitored: MonitoredConsumer[] = this.consumers.map((c, i) => ({
      name: config.consumers[i]!.name,
      ingest: c.ingest.function,
      worker: c.worker.function,
      eventSourceMappingIds: c.ingest.eventSourceMappingIds,
      schemaRegistry: config.consumers[i]!.schemaRegistry !== undefined,
      emits: config.consumers[i]!.outboxTopics.length > 0,
    }));
    const functions: MonitoredFunction[] = [
      ...monitored.flatMap((c) => [
        { label: `${c.name} ingest`, function: c.ingest },
        { label: `${c.name} worker`, function: c.worker },
      ]),
      { label: 'reaper', function: reaper.function },
      { label: 'ops', function: ops.function },
      ...(relay ? [{ label: 'outbox relay', function: relay.function }] : []),
    ];
    const scheduled: ScheduledFunction[] = [
      ...monitored.map((c) => ({ label: `${c.name} worker`, function: c.worker, intervalMinutes: 1, consumer: c.name })),
      { label: 'reaper', function: reaper.function, intervalMinutes: config.reaper.intervalMinutes },
      ...(relay ? [{ label: 'outbox relay', function: relay.function, intervalMinutes: config.relay.intervalMinutes }] : []),
    ];
    new InboxDashboard(this, 'Dashboard', { metrics, consumers: monitored, functions, cluster: stateful.cluster });
    new InboxAlarms(this, 'Alarms', {
      metrics,
      consumers: monitored,
      functions,
      scheduled,
      failureQueues: [
        { label: 'The schedules\' dead-letter queue', queue: schedules.deadLetterQueue },
        { label: 'The failed-invocations queue', queue: schedules.failedInvocations },
      ],
      database: { cluster: stateful.cluster, maxCapacityAcu: config.database.maxCapacityAcu },
      thresholds: config.alarms,
      topic: this.alarmTopic,
    });
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
