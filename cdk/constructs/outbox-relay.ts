/**
 * The outbox relay: publishes the events the handlers emitted (integration.outbox) to their
 * declared topics on MSK, every minute (EventBridge Scheduler), draining in a loop within
 * the invocation. IAM authentication to the cluster with the function's role: Connect and
 * WriteDataIdempotently (its producer is idempotent) on the cluster, DescribeTopic and
 * WriteData on the declared outbox topics only.
 *
 * The brokers: the stage's relay.bootstrapBrokers, or looked up at deploy time
 * (kafka:GetBootstrapBrokers, the IAM string), so `cdk synth` stays offline and a dev
 * cluster created in the same deployment works too.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as cr from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import { DatabaseRoles } from '../../functions/lib/database-roles';
import type { StageConfig } from '../config';
import { InboxFunction, type FunctionPlatform } from './inbox-function';
import { kafkaResourceArns } from './kafka-ingest';
import type { KafkaArnPrefixes } from '../stacks/stage-references';
import { retentionDays } from './log-retention';
import { acknowledge } from './nag';
import type { Schedules } from './scheduled';

export interface OutboxRelayProps {
  platform: FunctionPlatform;
  relay: StageConfig['relay'];
  /** Literal or token (a cluster created in the stage). */
  clusterArn: string;
  kafkaArnPrefixes: KafkaArnPrefixes;
  /** Every topic a declared consumer emits to. */
  topics: string[];
  schedules: Schedules;
  /** The brokers' lookup: its provider function's log group. */
  logRetentionDays: number;
}

export class OutboxRelay extends Construct {
  readonly function: InboxFunction;
  readonly schedule: scheduler.Schedule;

  constructor(scope: Construct, id: string, props: OutboxRelayProps) {
    super(scope, id);
    const { relay, clusterArn } = props;
    const brokers = relay.bootstrapBrokers ?? this.lookUpBrokers(clusterArn, props.logRetentionDays);

    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: 'functions/relay/handler.ts',
      description: 'Kafka inbox outbox relay: publishes emitted events to MSK in order per aggregate',
      timeout: Duration.seconds(relay.timeoutSeconds),
      database: { role: DatabaseRoles.relay },
      // Its producer reaches the brokers from the Kafka client group, which the cluster admits.
      kafkaClient: true,
      environment: {
        KAFKA_BROKERS: brokers,
        RELAY_BATCH_SIZE: String(relay.batchSize),
        RELAY_SAFETY_MARGIN_MS: String(relay.safetyMarginSeconds * 1000),
        // Longer than the invocation (the stage config checks it); the relay caps each lease
        // at the time its invocation has left.
        LEASE_SECONDS: String(relay.leaseSeconds),
        // No statement may outlast the margin kept before the deadline.
        DB_STATEMENT_TIMEOUT_MS: String(relay.safetyMarginSeconds * 1000),
      },
    });

    const { topicArns } = kafkaResourceArns(props.kafkaArnPrefixes, props.topics, []);
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
      'Publish the outbox to Kafka, in order per aggregate',
    );
  }

  private lookUpBrokers(clusterArn: string, logRetentionDays: number): string {
    const call: cr.AwsSdkCall = {
      service: 'Kafka',
      action: 'getBootstrapBrokers',
      parameters: { ClusterArn: clusterArn },
      // A different cluster is a new lookup.
      physicalResourceId: cr.PhysicalResourceId.of(clusterArn),
      outputPaths: ['BootstrapBrokerStringSaslIam'],
    };
    const lookup = new cr.AwsCustomResource(this, 'BootstrapBrokers', {
      onCreate: call,
      onUpdate: call,
      policy: cr.AwsCustomResourcePolicy.fromSdkCalls({ resources: [clusterArn] }),
      installLatestAwsSdk: false,
      logGroup: new logs.LogGroup(this, 'BootstrapBrokersLogs', {
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
    return lookup.getResponseField('BootstrapBrokerStringSaslIam');
  }
}
