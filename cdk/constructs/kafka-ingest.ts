/**
 * One consumer's ingest side: the ingest function and one MSK event-source mapping per
 * topic, in provisioned mode, with partial batch responses and bounded retries, keeping
 * records of any age by default. Records the mapping gives up on (retries exhausted: the
 * database was down for that long) go to the on-failure bucket with their payload, so
 * nothing is dropped silently; `ops reingest-failed` brings them back. A consumer
 * that declares a schema registry gets it on every one of its mappings, and nothing else does.
 */
import { Annotations, Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { ConfluentSchemaRegistry, GlueSchemaRegistry, ManagedKafkaEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { FAILED_BATCH_PREFIX } from '../../functions/ops/failed-batches';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { GLUE_REGISTRY_ARN, type SchemaRegistry } from '../../functions/framework/schema-registry';
import { ingestRoleOf } from '../../functions/lib/database-roles';
import { acknowledge, resourceFinding, type NagAcknowledgement } from './nag';
import type { ConsumerStageConfig } from '../config';
import type { KafkaArnPrefixes } from '../stacks/stage-references';
import { consumerEntry, sourceOf } from '../function-entries';
import { InboxFunction, type FunctionPlatform } from './inbox-function';

export interface KafkaIngestProps {
  platform: FunctionPlatform;
  consumer: ConsumerStageConfig;
  /** Literal or token (a cluster created in the stage). */
  clusterArn: string;
  /** The cluster's topic and group ARN prefixes, built once per stage (stage-references.ts). */
  kafkaArnPrefixes: KafkaArnPrefixes;
  failedRecords: s3.IBucket;
}

/** The topic and group ARNs under a cluster's prefixes. */
export function kafkaResourceArns(
  prefixes: KafkaArnPrefixes,
  topics: readonly string[],
  groups: readonly string[],
): { topicArns: string[]; groupArns: string[] } {
  return { topicArns: topics.map((t) => `${prefixes.topic}/${t}`), groupArns: groups.map((g) => `${prefixes.group}/${g}`) };
}

/**
 * The S3 on-failure destination with what AWS documents for it (Lambda developer guide,
 * "Capturing discarded batches for Amazon MSK"): s3:PutObject on the bucket's objects and
 * s3:ListBucket on the bucket. CDK's S3OnFailureDestination grants read-write instead
 * (GetObject*, DeleteObject*, Abort*, List*, GetBucket*): the ingest function would be
 * able to read and delete every failed batch, which it never does. grantPut() is not it
 * either (object tagging, legal hold, retention).
 *
 * PutObject only under aws/lambda/, where mappings write (`aws/lambda/<mapping UUID>/…`), not
 * under the mapping's own prefix: its UUID exists only once the mapping does, and the mapping
 * needs the role's permissions when it is created (CloudFormation creates the mapping after
 * the function and its role's policy; a policy naming the UUID would have to come after the
 * mapping, and Lambda checks the role's access to the destination when the mapping is
 * created or updated). So one consumer's ingest role could still write over another's
 * batch: the bucket keeps every overwritten version for its retention (platform-stack.ts).
 */
export class S3OnFailure implements lambda.IEventSourceDlq {
  constructor(private readonly bucket: s3.IBucket) {}

  bind(_target: lambda.IEventSourceMapping, targetHandler: lambda.IFunction): lambda.DlqDestinationConfig {
    targetHandler.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['s3:PutObject'], resources: [this.bucket.arnForObjects(`${FAILED_BATCH_PREFIX}*`)] }),
    );
    targetHandler.addToRolePolicy(new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: [this.bucket.bucketArn] }));
    return { destination: this.bucket.bucketArn };
  }
}

export class KafkaIngest extends Construct {
  readonly function: InboxFunction;
  /** The mappings' ids (dimension EventSourceMappingUUID of the ESM metrics; ops pause --ingest). */
  readonly eventSourceMappingIds: string[] = [];
  /** The mappings' ARNs, for the ops function's grant to switch them. */
  readonly eventSourceMappingArns: string[] = [];

  constructor(scope: Construct, id: string, props: KafkaIngestProps) {
    super(scope, id);
    const { consumer } = props;

    this.function = new InboxFunction(this, 'Function', {
      platform: props.platform,
      entry: consumerEntry('ingest', consumer.name, sourceOf(consumer)),
      description: `Kafka inbox ingest: ${consumer.name} (${consumer.mode})`,
      memorySize: consumer.ingestMemoryMb,
      timeout: Duration.seconds(consumer.ingestTimeoutSeconds),
      // inbox_ingest; an inline consumer's ingest also finishes its rows: inbox_ingest_inline.
      database: { role: ingestRoleOf(consumer) },
      environment: {
        CONSUMER_NAME: consumer.name,
        // Where the function reads writer schemas (docs/ingest.md, "Binary values"): names and
        // ARNs only, the credentials stay in the secret it names.
        ...(consumer.schemaRegistry === undefined ? {} : { SCHEMA_REGISTRY: JSON.stringify(consumer.schemaRegistry) }),
      },
    });

    const registry = consumer.schemaRegistry === undefined ? undefined : this.schemaRegistry(consumer.schemaRegistry);
    this.addMappings(props, registry);
    if (consumer.maxRecordAgeSeconds !== undefined) this.warnOfRecordAge(consumer.name, consumer.maxRecordAgeSeconds);
    this.grantKafka(props);

    acknowledge(this.function, [
      {
        id: 'AwsSolutions-IAM4',
        reason:
          'AWSLambdaMSKExecutionRole is attached by the CDK ManagedKafkaEventSource: the ESM needs its kafka:Describe*/GetBootstrapBrokers and ENI actions, which AWS does not support scoping.',
        findings: ['Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaMSKExecutionRole'],
      },
      {
        id: 'AwsSolutions-IAM5',
        reason:
          "s3:PutObject on the on-failure bucket's objects under aws/lambda/, where the mapping writes one object per failed batch under keys it chooses (its UUID, partition and time).",
        findings: [resourceFinding(this, props.failedRecords.arnForObjects(`${FAILED_BATCH_PREFIX}*`))],
      },
      ...(registry?.acknowledgements ?? []),
    ]);
  }

  /** One provisioned-mode mapping per topic, each in the consumer's group for that topic. */
  private addMappings(props: KafkaIngestProps, registry: { config: GlueSchemaRegistry | ConfluentSchemaRegistry } | undefined): void {
    const { consumer } = props;
    const onFailure = new S3OnFailure(props.failedRecords);
    for (const topic of consumer.topics) {
      const source = new ManagedKafkaEventSource({
        clusterArn: props.clusterArn,
        topic,
        consumerGroupId: consumer.consumerGroupIds[topic]!,
        startingPosition: lambda.StartingPosition[consumer.startingPosition],
        batchSize: consumer.batchSize,
        maxBatchingWindow: Duration.seconds(consumer.batchingWindowSeconds),
        provisionedPollerConfig: {
          minimumPollers: consumer.minPollers,
          maximumPollers: consumer.maxPollers,
          ...(consumer.pollerGroupName === undefined ? {} : { pollerGroupName: consumer.pollerGroupName }),
        },
        reportBatchItemFailures: true,
        bisectBatchOnError: true,
        retryAttempts: consumer.retryAttempts,
        ...(consumer.maxRecordAgeSeconds === undefined ? {} : { maxRecordAge: Duration.seconds(consumer.maxRecordAgeSeconds) }),
        onFailure,
        // ERROR_COUNT carries SchemaRegistryErrorCount, the one trace of records that failed validation.
        metricsConfig: { metrics: [lambda.MetricType.EVENT_COUNT, lambda.MetricType.ERROR_COUNT, lambda.MetricType.KAFKA_METRICS] },
        ...(registry === undefined ? {} : { schemaRegistryConfig: registry.config }),
      });
      this.function.addEventSource(source);
      this.eventSourceMappingIds.push(source.eventSourceMappingId);
      this.eventSourceMappingArns.push(source.eventSourceMappingArn);
    }
  }

  /**
   * A finite record age discards by age: the mapping sends older records to the on-failure
   * bucket without invoking the function, whatever retries remain. Synth says what that costs.
   */
  private warnOfRecordAge(name: string, seconds: number): void {
    Annotations.of(this).addWarningV2(
      'kafka-inbox:finite-record-age',
      `${name}: maxRecordAgeSeconds is ${seconds} (${(seconds / 3600).toFixed(1)} h). Its mappings send records older than that to the ` +
        'on-failure bucket before the ingest function sees them: a first deploy with TRIM_HORIZON on a topic with older history, or an ' +
        'ingest pause or outage longer than that, puts them there, to be re-ingested by hand (ops reingest-failed). ' +
        'Leave it unset to keep records of any age; retryAttempts still bounds a failing batch.',
    );
  }

  /**
   * MSK IAM auth: the mapping connects with the function's role. Least privilege on the
   * cluster, this consumer's topics and its consumer groups.
   */
  private grantKafka(props: KafkaIngestProps): void {
    const { consumer } = props;
    const groups = Object.values(consumer.consumerGroupIds);
    const { topicArns, groupArns } = kafkaResourceArns(props.kafkaArnPrefixes, consumer.topics, groups);
    this.function.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['kafka-cluster:Connect', 'kafka-cluster:DescribeClusterDynamicConfiguration'],
        resources: [props.clusterArn],
      }),
    );
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['kafka-cluster:DescribeTopic', 'kafka-cluster:ReadData'], resources: topicArns }),
    );
    this.function.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['kafka-cluster:DescribeGroup', 'kafka-cluster:AlterGroup'], resources: groupArns }),
    );
  }

  /**
   * The library's registry classes grant what the mapping needs on the function's role (it
   * polls with that role): Glue, glue:GetRegistry on the registry and glue:GetSchemaVersion
   * on it and its schemas; Confluent, read access to exactly the declared secret (plus, with
   * a customer-managed key, decrypt through Secrets Manager). One instance serves every topic.
   */
  private schemaRegistry(declared: SchemaRegistry): {
    config: GlueSchemaRegistry | ConfluentSchemaRegistry;
    acknowledgements: NagAcknowledgement[];
  } {
    const common = {
      eventRecordFormat: lambda.EventRecordFormat[declared.recordFormat],
      schemaValidationConfigs: declared.validate.map((a) => ({ attribute: lambda.KafkaSchemaValidationAttribute[a] })),
    };
    if (declared.type === 'confluent') {
      const secret = secretsmanager.Secret.fromSecretCompleteArn(this, 'SchemaRegistrySecret', declared.secretArn);
      if (declared.secretKmsKeyArn !== undefined) {
        // Written out: the secret's grantRead cannot grant on an imported key (its policy is
        // not ours; the ViaService grant then adds nothing). Decrypt only as Secrets Manager
        // does it for this function, never directly.
        this.function.addToRolePolicy(
          new iam.PolicyStatement({
            actions: ['kms:Decrypt'],
            resources: [declared.secretKmsKeyArn],
            conditions: { StringEquals: { 'kms:ViaService': `secretsmanager.${Stack.of(this).region}.amazonaws.com` } },
          }),
        );
      }
      return {
        config: new ConfluentSchemaRegistry({
          ...common,
          schemaRegistryUri: declared.url,
          authenticationType: lambda.KafkaSchemaRegistryAccessConfigType[declared.authentication],
          secret,
        }),
        acknowledgements: [],
      };
    }
    const name = GLUE_REGISTRY_ARN.exec(declared.registryArn)![3]!;
    return {
      config: new GlueSchemaRegistry({ ...common, schemaRegistryArn: declared.registryArn }),
      acknowledgements: [
        {
          id: 'AwsSolutions-IAM5',
          reason:
            'glue:GetSchemaVersion on the schemas of the one declared registry (schema/<registry>/*): producers register and evolve their schemas at will, so their names are not known at deploy time.',
          // cdk-nag names an Fn::Sub resource by its JSON; this is the one GlueSchemaRegistry writes.
          findings: [
            `Resource::${JSON.stringify(['arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:schema/${registryName}/*', { registryName: name }])}`,
          ],
        },
      ],
    };
  }
}
