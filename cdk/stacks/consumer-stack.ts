/**
 * A consumer stack: the consumers that chose it (declaration or stage config, `stack`), each
 * with its ingest function and mappings, its worker function and schedule, its outbox relay
 * and schedule when it emits events, its alarms, and a dashboard of their rows. Everything
 * shared (buckets, queues, schedule group and role, alarm topic, the reaper, ops and
 * migrations) is the platform stack's, read here
 * through SSM parameters; nothing here is written for the platform stack but the consumer
 * directory entries ops reads. A stack holds at most maxConsumersPerStack consumers, so no
 * stack of the stage nears CloudFormation's limits however many consumers the stage has
 * (docs/stacks.md).
 */
import { Stack, Tags, type StackProps } from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as ssm from 'aws-cdk-lib/aws-ssm';
import { Construct } from 'constructs';
import type { ConsumerDirectoryEntry } from '../../functions/ops/consumer-directory';
import { directoryParameterName } from '../../functions/ops/consumer-directory';
import type { ConsumerStageConfig, StageConfig } from '../config';
import { InboxAlarms, type ScheduledFunction } from '../constructs/alarms';
import { ConsumerWorker } from '../constructs/consumer-worker';
import { InboxDashboard } from '../constructs/dashboard';
import type { FunctionPlatform } from '../constructs/inbox-function';
import { KafkaIngest } from '../constructs/kafka-ingest';
import { OutboxRelay, relayBrokersOf } from '../constructs/outbox-relay';
import { acknowledgeLogRetentionProvider, retentionDays } from '../constructs/log-retention';
import { InboxMetrics, type MonitoredConsumer, type MonitoredFunction } from '../constructs/monitoring';
import { INGEST_TAG, WORKER_TAG } from '../constructs/ops';
import { ImportedSchedules, type ScheduleSupport } from '../constructs/scheduled';
import { consumerDirectoryPath, readPlatformParameters, stageIdOf } from './platform-references';
import { StatefulReferences, type KafkaArnPrefixes } from './stage-references';

export interface ConsumerStackProps extends StackProps {
  config: StageConfig;
  /** The stack's key (`<prefix>-<stage>-consumers-<key>`). */
  key: string;
  consumers: ConsumerStageConfig[];
}

/** A consumer's ingest and worker, under one construct named for the consumer. */
export class InboxConsumer extends Construct {
  readonly ingest: KafkaIngest;
  readonly worker: ConsumerWorker;
  /** Its outbox relay, when it emits events: a construct of the stack (OutboxRelay<Consumer>). */
  readonly relay: OutboxRelay | undefined;

  constructor(
    scope: Construct,
    id: string,
    props: {
      platform: FunctionPlatform;
      consumer: ConsumerStageConfig;
      config: StageConfig;
      clusterArn: string;
      kafkaArnPrefixes: KafkaArnPrefixes;
      failedRecords: s3.IBucket;
      schedules: ScheduleSupport;
    },
  ) {
    super(scope, id);
    this.ingest = new KafkaIngest(this, 'Ingest', {
      platform: props.platform,
      consumer: props.consumer,
      clusterArn: props.clusterArn,
      kafkaArnPrefixes: props.kafkaArnPrefixes,
      failedRecords: props.failedRecords,
    });
    this.worker = new ConsumerWorker(this, 'Worker', {
      platform: props.platform,
      consumer: props.consumer,
      worker: props.config.worker,
      schedules: props.schedules,
    });
    if (props.consumer.wakeUps) this.worker.wakeableBy(this.ingest.function);
    const { consumer, config } = props;
    this.relay =
      consumer.outboxTopics.length === 0
        ? undefined
        : new OutboxRelay(Stack.of(this), `OutboxRelay${id}`, {
            platform: props.platform,
            consumer,
            declared: config.manifest.find((c) => c.name === consumer.name)!,
            relay: config.relay,
            clusterArn: props.clusterArn,
            kafkaArnPrefixes: props.kafkaArnPrefixes,
            brokers: relayBrokersOf(this, config.relay, props.clusterArn, config.observability.logRetentionDays),
            schedules: props.schedules,
          });
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

/** The platform's FunctionPlatform as any stack of the stage builds it from the stateful stack's parameters. */
export function functionPlatformOf(stateful: StatefulReferences, config: StageConfig): FunctionPlatform {
  return {
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
}

/** What the monitoring of a consumer needs, from its constructs. */
export function monitoredOf(consumer: InboxConsumer, config: ConsumerStageConfig): MonitoredConsumer {
  return {
    name: config.name,
    ingest: consumer.ingest.function,
    worker: consumer.worker.function,
    eventSourceMappingIds: consumer.ingest.eventSourceMappingIds,
    schemaRegistry: config.schemaRegistry !== undefined,
    emits: config.outboxTopics.length > 0,
  };
}

export class ConsumerStack extends Stack {
  readonly key: string;
  readonly consumers: InboxConsumer[] = [];
  readonly dashboard: InboxDashboard;
  readonly alarms: InboxAlarms;

  constructor(scope: Construct, id: string, props: ConsumerStackProps) {
    super(scope, id, props);
    const { config } = props;
    this.key = props.key;
    const stageId = stageIdOf(config);

    const stateful = new StatefulReferences(this, 'Stateful', config);
    const platform = functionPlatformOf(stateful, config);
    const shared = readPlatformParameters(this, config);
    const failedRecords = s3.Bucket.fromBucketArn(this, 'FailedRecords', shared.failedRecordsBucketArn);
    const schedules = new ImportedSchedules(this, 'Schedules', {
      groupName: shared.scheduleGroupName,
      roleArn: shared.schedulerRoleArn,
      deadLetterQueueArn: shared.schedulesDeadLetterQueueArn,
      failedInvocationsQueueArn: shared.failedInvocationsQueueArn,
      stageId,
    });

    for (const consumer of props.consumers) {
      const built = new InboxConsumer(this, constructIdOf(consumer.name), {
        platform,
        consumer,
        config,
        clusterArn: stateful.mskClusterArn,
        kafkaArnPrefixes: stateful.kafkaArnPrefixes,
        failedRecords,
        schedules,
      });
      this.consumers.push(built);
      // The platform's roles reach these by tag (ops resumes a worker, pauses a mapping).
      Tags.of(built.worker.function).add(WORKER_TAG, stageId);
      Tags.of(built.ingest).add(INGEST_TAG, stageId);
      const entry: ConsumerDirectoryEntry = {
        workerSchedule: built.worker.schedule.scheduleName,
        workerFunction: built.worker.function.functionName,
        ingestMappings: built.ingest.eventSourceMappingIds,
        ingestFunction: built.ingest.function.functionName,
      };
      new ssm.StringParameter(built, 'DirectoryEntry', {
        parameterName: directoryParameterName(consumerDirectoryPath(config), consumer.name),
        stringValue: this.toJsonString(entry),
        description: `Kafka inbox ${config.stage}: what ops pause/resume switch and reingest-failed invokes for ${consumer.name}`,
      });
    }
    acknowledgeLogRetentionProvider(this);

    const metrics = new InboxMetrics(config.observability.metricsNamespace, config.observability.serviceName);
    const monitored = this.consumers.map((c, i) => monitoredOf(c, props.consumers[i]!));
    const relays = this.consumers.flatMap((c, i) => (c.relay ? [{ name: props.consumers[i]!.name, function: c.relay.function }] : []));
    const functions: MonitoredFunction[] = [
      ...monitored.flatMap((c) => [
        { label: `${c.name} ingest`, function: c.ingest },
        { label: `${c.name} worker`, function: c.worker },
      ]),
      ...relays.map((r) => ({ label: `outbox relay: ${r.name}`, function: r.function })),
    ];
    const scheduled: ScheduledFunction[] = [
      ...monitored.map((c) => ({
        label: `${c.name} worker`,
        function: c.worker,
        intervalMinutes: 1,
        consumer: c.name,
      })),
      // A relay keeps publishing while its consumer is paused (the pause stops the worker): its silence pages.
      ...relays.map((r) => ({ label: `outbox relay: ${r.name}`, function: r.function, intervalMinutes: config.relay.intervalMinutes })),
    ];
    this.dashboard = new InboxDashboard(this, 'Dashboard', { metrics, consumers: monitored, functions });
    this.alarms = new InboxAlarms(this, 'Alarms', {
      metrics,
      consumers: monitored,
      functions,
      scheduled,
      failureQueues: [],
      thresholds: config.alarms,
      // A stage's existing topic by its ARN; else the platform's, through its parameter.
      topic: sns.Topic.fromTopicArn(this, 'AlarmTopic', config.alarms.snsTopicArn ?? shared.alarmTopicArn),
    });
  }
}
