/**
 * An emitting consumer's outbox relay, in that consumer's stack: publishes the events its
 * handlers emitted (its rows of integration.outbox) to their declared topics on MSK, every
 * minute (EventBridge Scheduler), draining in a loop within the invocation. It connects to
 * the database as the consumer's relay role (inbox_relay_<consumer>, IAM authentication,
 * rds-db:connect for that user only), which reaches that consumer's outbox rows and lanes
 * only. IAM authentication to the cluster with the function's role: Connect and
 * WriteDataIdempotently (its producer is idempotent) on the cluster, DescribeTopic and
 * WriteData on the consumer's declared outbox topics only.
 *
 * The brokers: the stage's relay.bootstrapBrokers, or looked up at deploy time
 * (kafka:GetBootstrapBrokers, the IAM string; one lookup per stack, `relayBrokersOf`), so
 * `cdk synth` stays offline and a dev cluster created in the same deployment works too.
 */
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as cr from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import { relayRoleOf } from '../../functions/lib/database-roles';
import type { ConsumerStageConfig, StageConfig } from '../config';
import type { ConsumerManifestEntry } from '../../functions/framework/manifest';
import { relayEntry } from '../function-entries';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import { kafkaResourceArns } from './kafka-ingest';
import type { KafkaArnPrefixes } from '../stacks/stage-references';
import { retentionDays } from './log-retention';
import { acknowledge } from './nag';
import { relayScheduleName, type ScheduleSupport } from './scheduled';

export interface OutboxRelayProps {
  platform: FunctionPlatform;
  /** The emitting consumer it serves: its outbox rows, its topics. */
  consumer: Pick<ConsumerStageConfig, 'name' | 'outboxTopics'>;
  /** Its manifest entry: the data its function's bundle carries (no consumer code). */
  declared: ConsumerManifestEntry;
  relay: StageConfig['relay'];
  /** Literal or token (a cluster created in the stage). */
  clusterArn: string;
  kafkaArnPrefixes: KafkaArnPrefixes;
  /** The brokers' IAM bootstrap string (relayBrokersOf). */
  brokers: string;
  schedules: ScheduleSupport;
}

export class OutboxRelay extends Construct {
  readonly function: InboxFunction;
  readonly schedule: scheduler.Schedule;

  constructor(scope: Construct, id: string, props: OutboxRelayProps) {
    super(scope, id);
    const { relay, clusterArn, consumer } = props;

    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: relayEntry(props.declared),
      description: `Kafka inbox outbox relay: ${consumer.name}`,
      timeout: Duration.seconds(relay.timeoutSeconds),
      database: { role: relayRoleOf(consumer) },
      // Its producer reaches the brokers from the Kafka client group, which the cluster admits.
      kafkaClient: true,
      environment: {
        CONSUMER_NAME: consumer.name,
        KAFKA_BROKERS: props.brokers,
        RELAY_BATCH_SIZE: String(relay.batchSize),
        // At least the relay role's statement_timeout (the stage config checks it).
        RELAY_SAFETY_MARGIN_MS: String(relay.safetyMarginSeconds * 1000),
        // Longer than the invocation (the stage config checks it); the relay caps each lease
        // at the time its invocation has left.
        LEASE_SECONDS: String(relay.leaseSeconds),
      },
    });

    const { topicArns } = kafkaResourceArns(props.kafkaArnPrefixes, consumer.outboxTopics, []);
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['kafka-cluster:Connect', 'kafka-cluster:WriteDataIdempotently'], resources: [clusterArn] }),
    );
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['kafka-cluster:DescribeTopic', 'kafka-cluster:WriteData'], resources: topicArns }),
    );

    this.schedule = props.schedules.schedule(
      this,
      'Schedule',
      this.function,
      Duration.minutes(relay.intervalMinutes),
      `Publish ${consumer.name}'s outbox to Kafka, in order per aggregate`,
      relayScheduleName(consumer.name),
    );
  }
}

/**
 * The brokers the relays of `scope`'s stack publish to: the stage's relay.bootstrapBrokers,
 * or one deploy-time lookup per stack, shared by its relays.
 */
export function relayBrokersOf(scope: Construct, relay: StageConfig['relay'], clusterArn: string, logRetentionDays: number): string {
  if (relay.bootstrapBrokers !== undefined) return relay.bootstrapBrokers;
  const stack = Stack.of(scope);
  const existing = stack.node.tryFindChild('OutboxRelayBootstrapBrokers') as cr.AwsCustomResource | undefined;
  return (existing ?? lookUpBrokers(stack, clusterArn, logRetentionDays)).getResponseField('BootstrapBrokerStringSaslIam');
}

function lookUpBrokers(stack: Stack, clusterArn: string, logRetentionDays: number): cr.AwsCustomResource {
  const call: cr.AwsSdkCall = {
    service: 'Kafka',
    action: 'getBootstrapBrokers',
    parameters: { ClusterArn: clusterArn },
    // A different cluster is a new lookup.
    physicalResourceId: cr.PhysicalResourceId.of(clusterArn),
    outputPaths: ['BootstrapBrokerStringSaslIam'],
  };
  const lookup = new cr.AwsCustomResource(stack, 'OutboxRelayBootstrapBrokers', {
    onCreate: call,
    onUpdate: call,
    policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: [clusterArn] }),
    installLatestAwsSdk: false,
    logGroup: new logs.LogGroup(stack, 'OutboxRelayBootstrapBrokersLogs', {
      retention: retentionDays(logRetentionDays),
      removalPolicy: RemovalPolicy.DESTROY,
    }),
  });
  // The provider is a stack-wide singleton; its role is what the lookup grants to.
  acknowledge(lookup.grantPrincipal as iam.Role, [
    {
      id: 'AwsSolutions-IAM4',
      reason:
        'The CDK AwsCustomResource provider runs with AWSLambdaBasicExecutionRole (its logs); its only other permission is kafka:GetBootstrapBrokers on this cluster.',
      findings: ['Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole'],
    },
  ]);
  return lookup;
}
