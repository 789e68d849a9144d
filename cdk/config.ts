/**
 * The stage configuration: typed, validated with zod, with named defaults.
 *
 * `cdk/app.ts` reads the raw context (`cdk.json`, `-c stage=…`) and passes it here; nothing
 * else on the infrastructure side reads context or env. A bad value fails synth with the
 * context path in the message (`stages.prod.msk.clusterArn: …`), before any resource exists.
 */
import { z } from 'zod';
import { SESSION_TIMEOUTS } from '../functions/lib/session-settings';
import { connectionBudget, connectionBudgetProblems } from './connection-budget';
import {
  GLUE_REGISTRY_ARN,
  schemaRegistrySchema,
  type SchemaRegistry,
  type SchemaRegistryDeclaration,
} from '../functions/framework/schema-registry';
import { DEFAULTS } from '../functions/lib/config-defaults';
import { OPERATOR_NAME } from '../functions/lib/database-roles';
import { declarationProblems, manifestOf, type ConsumerManifest, type ConsumerManifestEntry } from '../functions/framework/manifest';
import type { ConsumerSource } from './function-entries';

export class StageConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StageConfigError';
  }
}

const SECURITY_GROUP_ID = /^sg-[0-9a-f]{8,17}$/;
const SUBNET_ID = /^subnet-[0-9a-f]{8,17}$/;

/** arn:<partition>:kafka:<region>:<account>:cluster/<name>/<uuid> */
const MSK_CLUSTER_ARN = /^arn:aws[a-z-]*:kafka:[a-z0-9-]+:\d{12}:cluster\/[A-Za-z0-9-]+\/[A-Za-z0-9-]+$/;
/** An IAM role or user: arn:<partition>:iam::<account>:role/<path/name> or :user/<path/name>. */
const IAM_PRINCIPAL_ARN = /^arn:aws[a-z-]*:iam::\d{12}:(role|user)\/[\w+=,.@/-]{1,512}$/;
/** Lambda: 1-200 characters of [a-zA-Z0-9-/*:_+=.@-]. */
const CONSUMER_GROUP_ID = /^[a-zA-Z0-9\-/*:_+=.@]{1,200}$/;

const int = (min: number, max: number) => z.number().int().min(min).max(max);

/** A consumer stack's key: the last part of its stack name (`<prefix>-<stage>-consumers-<key>`). */
const CONSUMER_STACK_KEY = /^[a-z0-9][a-z0-9-]{0,19}$/;
const CONSUMER_STACK_KEY_RULE = 'must be 1-20 characters of [a-z0-9-], starting with a letter or digit';

/** The consumer stack of a consumer that names none, in its declaration or the stage. */
export const DEFAULT_CONSUMER_STACK = 'main';

/**
 * Consumers per consumer stack, at most: a consumer adds about 25 resources and 30 KB of
 * template, so 12 keep a stack near 300 of CloudFormation's 500 resources and a third of
 * its 1 MB (the budget check in cdk/stacks/budget.ts measures the real templates).
 */
export const MAX_CONSUMERS_PER_STACK = 12;

/** Worker schedules are named `worker-<consumer>` (64 characters at most): ops finds them by that name. */
const MAX_CONSUMER_NAME = 57;

/** The retention periods CloudWatch Logs accepts (days), up to a year. */
const logRetentionDays = z.literal([1, 3, 5, 7, 14, 30, 60, 90, 180, 365]);

/** Interface endpoints the functions call (docs/deploying.md): nothing else gets one. */
export const INTERFACE_ENDPOINTS = ['secretsmanager', 'lambda', 'scheduler'] as const;
export type InterfaceEndpoint = (typeof INTERFACE_ENDPOINTS)[number];

const AVAILABILITY_ZONE = /^[a-z]{2}(-gov)?-[a-z]+-\d[a-z]$/;

/** What every consumer gets unless its own entry overrides it. */
/** What every tracing exporter takes: the OTLP/HTTP body's encoding and the sampler (OpenTelemetry's names). */
const tracingCommon = {
  protocol: z.enum(['http/protobuf', 'http/json']).default('http/protobuf').describe('The OTLP/HTTP body encoding.'),
  sampler: z
    .enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'])
    .default('parentbased_always_on')
    .describe("OpenTelemetry's sampler."),
  samplerArg: z.number().min(0).max(1).optional().describe('The ratio of a traceidratio sampler.'),
};

/**
 * Where a stage's spans go:
 *   off               the functions load no tracing SDK (the context still travels in headers);
 *   collector-layer   a collector Lambda extension (the ADOT collector layer, or the
 *                     OpenTelemetry community's) receives on localhost:4318 and exports as its
 *                     configuration says (its default: AWS X-Ray; CloudWatch's OTLP endpoint
 *                     with SigV4 through a configuration of your own, configUri);
 *   otlp              straight to an OTLP/HTTP endpoint the functions' subnets reach (a
 *                     collector of your own; no credentials travel in the environment).
 */
const tracingStage = z
  .discriminatedUnion('exporter', [
    z.object({ exporter: z.literal('off') }),
    z.object({
      exporter: z.literal('collector-layer'),
      layerArn: z
        .string()
        .regex(/^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$/, 'must be a Lambda layer version ARN')
        .describe("The collector extension's layer version, in the stage's region, for arm64."),
      configUri: z
        .string()
        .min(1)
        .optional()
        .describe("OPENTELEMETRY_COLLECTOR_CONFIG_URI: the collector's configuration (a file in a layer, or an https URI)."),
      ...tracingCommon,
    }),
    z.object({
      exporter: z.literal('otlp'),
      endpoint: z
        .url({ protocol: /^https?$/ })
        .describe('otlp: the OTLP/HTTP endpoint the functions send spans to (a collector of your own).'),
      ...tracingCommon,
    }),
  ])
  .default({ exporter: 'off' });

export type TracingStage = z.output<typeof tracingStage>;

const consumerSettings = z.object({
  batchSize: int(1, 10_000).default(500).describe('Records per ingest invocation (Kafka ESM: 1-10000).'),
  batchingWindowSeconds: int(0, 300).default(1).describe('How long the ESM gathers records before invoking (0-300 s).'),
  startingPosition: z
    .enum(['LATEST', 'TRIM_HORIZON'])
    .default('TRIM_HORIZON')
    .describe('Where a new consumer group starts. Ignored once the group has committed offsets.'),
  minPollers: int(1, 200).default(1).describe('Provisioned-mode pollers each ingest mapping keeps running, at least.'),
  maxPollers: int(1, 200).default(2).describe('Provisioned-mode pollers per ingest mapping, at most.'),
  pollerGroupName: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,128}$/, 'must be 1-128 characters of [A-Za-z0-9_-]')
    .optional()
    .describe(
      'Provisioned mode: mappings with the same poller group share its pollers (and their cost) instead of each keeping its own minimum. Unset: each mapping has its own.',
    ),
  retryAttempts: int(0, 10_000)
    .default(100)
    .describe(
      'ESM retries of a batch that keeps failing (infrastructure failures only: poison goes to the poison table). Finite, so that a dead database cannot block a partition forever; exhausted records go to the on-failure bucket, never silently dropped.',
    ),
  maxRecordAgeSeconds: int(60, 604_800)
    .optional()
    .describe(
      'Unset (the default): the mapping keeps records of any age, and retryAttempts alone bounds a failing batch. Set (60 s - 7 days): records older than this go to the on-failure bucket before the ingest function sees them, which synth warns about (cdk/constructs/kafka-ingest.ts).',
    ),
  ingestMemoryMb: int(128, 10_240).default(512).describe("The ingest function's memory."),
  ingestTimeoutSeconds: int(3, 900).default(60).describe("The ingest function's timeout."),
  workerMemoryMb: int(128, 10_240).default(512).describe("The worker function's memory."),
  workerTimeoutSeconds: int(10, 900).default(120).describe("The worker function's timeout."),
  workerBatchSize: int(1, 10_000).default(100).describe('Rows a worker claims per batch.'),
  workerMaxConcurrency: int(1, 100)
    .default(4)
    .describe(
      'Workers of this consumer awake at once, at most (its slots, docs/worker.md "Wake-ups"): the schedule\'s, the one its ingest wakes, and those they fan out to.',
    ),
  workerReservedConcurrency: z
    .union([z.boolean(), int(1, 1_000)])
    .default(false)
    .describe(
      "The worker function's reserved concurrency, an explicit choice checked against quotas.lambdaConcurrentExecutions: false (the default) reserves none, the consumer's slots alone bound its workers; true reserves workerMaxConcurrency + 1 (the one more is a scheduled or late invocation that finds every slot held and returns); a number reserves that many.",
    ),
  workerIdleSeconds: int(0, 300)
    .default(10)
    .describe('An awake worker keeps looking for new rows this long after the last it found (0: it stops at once).'),
  wakeUps: z
    .boolean()
    .default(true)
    .describe('The ingest function wakes the worker, and workers fan out and hand over; false: the schedule alone.'),
});

/**
 * A consumer's own entry overrides only what it names: its fields carry no defaults (zod's
 * partial() keeps them, and a consumer that set one setting would get every other one back
 * at its default instead of the stage's consumerDefaults).
 */
const withoutDefaults = Object.fromEntries(
  Object.entries(consumerSettings.shape).map(([key, field]) => [key, (field instanceof z.ZodDefault ? field.unwrap() : field).optional()]),
) as unknown as { [K in keyof typeof consumerSettings.shape]: z.ZodOptional<z.ZodType<z.output<(typeof consumerSettings.shape)[K]>>> };

const consumerOverride = z.object(withoutDefaults).extend({
  topics: z
    .array(z.string().min(1).max(249))
    .min(1)
    .optional()
    .describe("Topics to subscribe to instead of the declaration's (e.g. a stage-specific prefix)."),
  consumerGroupId: z
    .string()
    .regex(CONSUMER_GROUP_ID, 'must be 1-200 characters of [a-zA-Z0-9-/*:_+=.@]')
    .optional()
    .describe("The Kafka consumer group; default: the consumer's name (suffixed per topic when it has several)."),
  enabled: z.boolean().default(true).describe('false: deploy nothing for this consumer in this stage.'),
  schemaRegistry: schemaRegistrySchema
    .optional()
    .describe("Sets or replaces the declaration's schema registry in this stage (functions/framework/schema-registry.ts)."),
  stack: z
    .string()
    .regex(CONSUMER_STACK_KEY, CONSUMER_STACK_KEY_RULE)
    .optional()
    .describe("The consumer stack it is deployed in, in this stage: replaces the declaration's choice (docs/stacks.md)."),
  movedFrom: z
    .string()
    .regex(CONSUMER_STACK_KEY, CONSUMER_STACK_KEY_RULE)
    .optional()
    .describe(
      'The stack it is deployed in until now, when it moves: the acknowledgement that the move replaces its functions, mappings and schedule (docs/stacks.md "Moving a consumer").',
    ),
});

export const stageSchema = z
  .object({
    account: z
      .string()
      .regex(/^\d{12}$/, 'must be a 12-digit account id')
      .optional()
      .describe("The stage's AWS account: set both account and region, or neither (environment-agnostic stacks)."),
    region: z
      .string()
      .regex(/^[a-z]{2}(-gov)?-[a-z]+-\d$/, 'must be a region such as eu-west-1')
      .optional()
      .describe("The stage's region: set with account."),
    stackPrefix: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9-]{0,40}$/)
      .default('KafkaInbox')
      .describe('Prefix of the stack names: `<prefix>-<stage>-stateful`.'),
    msk: z
      .object({
        clusterArn: z
          .string()
          .regex(MSK_CLUSTER_ARN, 'must be an MSK cluster ARN (arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid>)')
          .optional()
          .describe('An existing cluster, imported by ARN (no lookup).'),
        securityGroupId: z
          .string()
          .regex(SECURITY_GROUP_ID, 'must be a security group id (sg-…)')
          .optional()
          .describe(
            "The existing cluster's security group: the stack admits the outbox relay's security group to it on the IAM broker port (9098). Unset: that rule is the cluster owner's to add.",
          ),
        createDevCluster: z
          .boolean()
          .default(false)
          .describe("Create a small MSK Serverless cluster (IAM auth) in this stage's VPC: dev stages only."),
      })
      .refine((m) => (m.clusterArn !== undefined) !== m.createDevCluster, {
        message: 'set exactly one of msk.clusterArn and msk.createDevCluster=true',
      })
      .refine((m) => m.securityGroupId === undefined || m.clusterArn !== undefined, {
        message: "securityGroupId is the existing cluster's (msk.clusterArn); the dev cluster's group is the stack's own",
      })
      .prefault({}),
    network: z
      .object({
        vpcId: z
          .string()
          .regex(/^vpc-[0-9a-f]{8,17}$/, 'must be a VPC id (vpc-…)')
          .optional()
          .describe(
            'An existing VPC, imported by id without a lookup: the functions, the database and its endpoints go into subnetIds. Unset: the stack creates a VPC (isolated subnets, no NAT).',
          ),
        subnetIds: z
          .array(z.string().regex(SUBNET_ID, 'must be a subnet id (subnet-…)'))
          .min(2)
          .max(6)
          .optional()
          .describe(
            'With vpcId: private subnets, in at least two availability zones, that reach the brokers and the AWS APIs the functions call.',
          ),
        availabilityZones: z
          .array(z.string().regex(AVAILABILITY_ZONE, 'must be an availability zone name such as eu-west-1a'))
          .min(2)
          .max(6)
          .optional()
          .describe(
            'The availability zone of each subnet (vpcId), or the zones of the created VPC. Given here, synth needs no lookup: required for a created VPC when account and region are set.',
          ),
        maxAzs: int(2, 3)
          .optional()
          .describe('Created VPC only: how many availability zones (default 2), when availabilityZones is unset.'),
        cidr: z
          .string()
          .regex(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/, 'must be a CIDR block')
          .optional()
          .describe('Created VPC only: its CIDR block (default 10.40.0.0/16).'),
        flowLogRetentionDays: logRetentionDays
          .optional()
          .describe('Created VPC only: how long its rejected-traffic flow logs are kept (default 30 days).'),
        interfaceEndpoints: z
          .array(z.enum(INTERFACE_ENDPOINTS))
          .optional()
          .describe(
            "Interface endpoints the stack creates, admitting the functions' security group only. Default: all three for a created VPC (it has no other way out); none for an existing one, whose NAT or own endpoints serve the functions (an endpoint with private DNS cannot be created twice in one VPC).",
          ),
      })
      .strict()
      .superRefine((n, ctx) => {
        const problem = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
        if (n.vpcId === undefined) {
          if (n.subnetIds !== undefined) problem('subnetIds', 'only with network.vpcId (an existing VPC)');
          if (n.availabilityZones !== undefined && n.maxAzs !== undefined) problem('maxAzs', 'set availabilityZones or maxAzs, not both');
          return;
        }
        for (const key of ['cidr', 'maxAzs', 'flowLogRetentionDays'] as const) {
          if (n[key] !== undefined) problem(key, 'only for a created VPC: an existing VPC (network.vpcId) is not changed by this stack');
        }
        if (n.subnetIds === undefined) problem('subnetIds', 'required with network.vpcId: the private subnets to use');
        if (n.availabilityZones === undefined || n.availabilityZones.length !== n.subnetIds?.length) {
          problem('availabilityZones', 'required with network.vpcId: the availability zone of each subnet, in the same order');
        }
      })
      .transform((n) =>
        n.vpcId === undefined
          ? {
              kind: 'created' as const,
              cidr: n.cidr ?? '10.40.0.0/16',
              maxAzs: n.availabilityZones?.length ?? n.maxAzs ?? 2,
              ...(n.availabilityZones === undefined ? {} : { availabilityZones: n.availabilityZones }),
              flowLogRetentionDays: n.flowLogRetentionDays ?? 30,
              interfaceEndpoints: n.interfaceEndpoints ?? [...INTERFACE_ENDPOINTS],
            }
          : {
              kind: 'existing' as const,
              vpcId: n.vpcId,
              subnetIds: n.subnetIds!,
              availabilityZones: n.availabilityZones!,
              interfaceEndpoints: n.interfaceEndpoints ?? [],
            },
      )
      .prefault({}),
    /**
     * The account's quotas the stage is checked against at synth. Lambda keeps 100 of the
     * account's concurrent executions unreserved; reserved concurrency must leave them.
     */
    quotas: z
      .object({
        lambdaConcurrentExecutions: int(10, 1_000_000)
          .optional()
          .describe(
            "The account's Lambda concurrent executions quota in the stage's region (`aws lambda get-account-settings`: AccountLimit.ConcurrentExecutions).",
          ),
      })
      .strict()
      .prefault({}),
    database: z
      .object({
        engineVersion: z
          .string()
          .regex(/^(16|17)\.\d+$/, 'must be 16.x or 17.x')
          .default('17.7')
          .describe('Aurora PostgreSQL engine version: a supported major (16 or 17) and its minor.'),
        databaseName: z
          .string()
          .regex(/^[a-z_][a-z0-9_]{0,62}$/)
          .default('inbox')
          .describe('The database the functions use.'),
        minCapacityAcu: z.number().min(0).max(256).default(0.5).describe('Aurora Serverless v2 minimum capacity, ACU.'),
        maxCapacityAcu: z
          .number()
          .min(1)
          .max(256)
          .default(4)
          .describe("Aurora Serverless v2 maximum capacity, ACU: the writer's max_connections follows it only after the writer restarts."),
        readers: int(0, 15).default(0).describe('Aurora Serverless v2 readers (the functions use the writer).'),
        backupRetentionDays: int(1, 35).default(7).describe('Automated backups kept, days.'),
        deletionProtection: z
          .boolean()
          .default(true)
          .describe("The cluster's deletion protection; also the stateful stack's termination protection."),
        rdsProxy: z.boolean().default(false).describe('Put an RDS Proxy between the functions and the cluster.'),
        maxConnections: int(1, 262_143)
          .optional()
          .describe(
            "The writer's max_connections, when its parameter group sets one (`show max_connections`). Unset: Aurora Serverless v2's default for the capacity range (cdk/connection-budget.ts).",
          ),
        logRetentionDays: logRetentionDays
          .default(30)
          .describe("How long the cluster's exported PostgreSQL log is kept in CloudWatch Logs."),
      })
      .refine((d) => d.minCapacityAcu <= d.maxCapacityAcu, { message: 'minCapacityAcu must not exceed maxCapacityAcu' })
      .prefault({}),
    /** Defaults for every consumer, then per-consumer overrides keyed by consumer name. */
    consumerDefaults: consumerSettings.prefault({}),
    consumers: z.record(z.string(), consumerOverride).default({}),
    maxConsumersPerStack: int(1, MAX_CONSUMERS_PER_STACK)
      .default(MAX_CONSUMERS_PER_STACK)
      .describe('How many consumers one consumer stack may hold (docs/stacks.md).'),
    sharedTables: z
      .array(z.string().regex(/^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$/, 'a table as schema.table, lower case'))
      .default([])
      .describe(
        'Tables (schema.table) that more than one consumer declaration may name in its `tables`. A table named by one declaration belongs to that consumer: synth refuses a second declaration naming it unless it is listed here (docs/stacks.md, "A table belongs to its consumer").',
      ),
    worker: z
      .object({
        leaseSeconds: int(30, 24 * 3600)
          .default(300)
          .describe('Row lease; longer than any worker invocation, so a live worker never loses its rows.'),
        safetyMarginSeconds: int(1, 300).default(10).describe('The worker stops claiming this long before its deadline.'),
      })
      .prefault({}),
    reaper: z
      .object({
        intervalMinutes: int(1, 60).default(1).describe("The reaper's schedule rate."),
        timeoutSeconds: int(10, 900).default(120).describe("The reaper's timeout."),
        safetyMarginSeconds: int(1, 300).default(10).describe('The reaper starts no batch this close to its deadline.'),
        batchSize: int(1, 100_000).default(1_000).describe('Rows per reaper statement.'),
        consumerSessionBoundSeconds: int(60, 24 * 3600)
          .default(DEFAULTS.consumerSessionBoundSeconds)
          .describe(
            "A consumer role's transaction running longer than this is ended by the reaper (docs/reaper.md, \"Sessions past the bound\"): above every consumer function's timeout, checked at synth. Default: Lambda's longest invocation.",
          ),
      })
      .prefault({}),
    relay: z
      .object({
        intervalMinutes: int(1, 60)
          .default(1)
          .describe("The outbox relays' schedule rate (one relay per consumer that declares emits, in its consumer stack)."),
        timeoutSeconds: int(10, 900).default(120).describe("The relays' timeout."),
        safetyMarginSeconds: int(1, 300)
          .default(30)
          .describe(
            "The relay starts no claim or send this close to its deadline: longer than one send can take (connect + request timeouts, times the producer's retries).",
          ),
        leaseSeconds: int(30, 24 * 3600)
          .default(300)
          .describe(
            "An outbox lane's lease: longer than a relay invocation can run (timeout + margin), so a live relay never loses a lane to another; the relay also caps it at the time its invocation has left.",
          ),
        batchSize: int(1, 10_000).default(200).describe('Outbox rows per relay claim.'),
        bootstrapBrokers: z
          .string()
          .regex(/^[A-Za-z0-9.-]+:\d{1,5}(,[A-Za-z0-9.-]+:\d{1,5})*$/, 'must be host:port,host:port')
          .optional()
          .describe(
            "The brokers' IAM bootstrap string (host:9098,…). Unset: looked up at deploy time (kafka:GetBootstrapBrokers on msk.clusterArn or the dev cluster).",
          ),
      })
      .prefault({}),
    observability: z
      .object({
        metricsNamespace: z.string().min(1).max(255).default('KafkaInbox').describe("The CloudWatch namespace of the functions' metrics."),
        serviceName: z.string().min(1).max(100).default('kafka-inbox').describe("The service name of the functions' logs and metrics."),
        logLevel: z
          .enum(['DEBUG', 'INFO', 'WARN', 'ERROR'])
          .default('INFO')
          .describe("The functions' application log level, in Lambda's logging configuration."),
        logRetentionDays: logRetentionDays
          .default(30)
          .describe(
            "The functions' log groups, and those of the helper functions the CDK adds (custom resources, the trigger, the secret rotation).",
          ),
        tracing: tracingStage.describe(
          "Where the functions' spans go (docs/tracing.md): off (no tracing SDK is loaded; the context still travels in headers), collector-layer (a collector Lambda extension on localhost:4318 exports as its configuration says) or otlp (straight to an OTLP/HTTP endpoint the functions' subnets reach).",
        ),
      })
      .prefault({}),
    failedRecordsRetentionDays: int(1, 3650)
      .default(30)
      .describe('On-failure bucket (records the ESM gave up on): how long objects are kept, and their overwritten versions.'),
    /**
     * The people who operate the stage (docs/ops.md, "Who did it"): each may call the ops
     * function's URL as their IAM principal, and connect to the database as their own role,
     * `inbox_ops_<name>` (IAM authentication), which the migration step provisions.
     */
    operators: z
      .array(
        z.strictObject({
          name: z
            .string()
            .regex(OPERATOR_NAME, 'must be 1-40 of a-z, 0-9 and _, starting with a letter')
            .describe("The operator's name: their database role is inbox_ops_<name>."),
          principalArn: z
            .string()
            .regex(IAM_PRINCIPAL_ARN, 'must be an IAM role or user ARN (arn:aws:iam::<account>:role/<name> or :user/<name>)')
            .describe("The IAM role (or user) they sign in as, in the stage's account."),
        }),
      )
      .default([])
      .superRefine((operators, ctx) => {
        const seen = new Set<string>();
        operators.forEach((o, i) => {
          if (seen.has(o.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `operator "${o.name}" is named twice` });
          seen.add(o.name);
        });
      }),
    alarms: z
      .object({
        email: z.email().optional().describe('Subscribed to the alarm topic (email confirmation needed).'),
        snsTopicArn: z
          .string()
          .regex(/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]+$/, 'must be an SNS topic ARN')
          .optional()
          .describe('An existing topic to send alarms to instead of creating one.'),
        quarantineDepth: int(0, 1_000_000).default(0).describe('Alarm when a consumer has more QUARANTINED rows than this.'),
        poisonRecords: int(0, 1_000_000).default(0).describe('Alarm when more records than this are poisoned in a period.'),
        oldestDueAgeSeconds: int(60, 7 * 86_400)
          .default(900)
          .describe('Alarm when the oldest due row has waited longer than this, seconds (not while the consumer is paused).'),
        offsetLag: int(1, 1_000_000_000)
          .default(10_000)
          .describe('Alarm when an ingest mapping is more records than this behind its topic (OffsetLag).'),
        functionErrors: int(0, 1_000_000).default(0).describe('Alarm when a function has more errors than this in a period.'),
        esmFailedRecords: int(0, 1_000_000)
          .default(0)
          .describe('Alarm when a mapping gives up on more records than this in a period (they go to the on-failure bucket).'),
        outboxUnpublishedAgeSeconds: int(60, 7 * 86_400)
          .default(300)
          .describe('Consumers that emit events: the oldest outbox row not yet published, in seconds.'),
        schemaRegistryErrors: int(0, 1_000_000)
          .default(0)
          .describe('Consumers with a schema registry: SchemaRegistryErrorCount of their mappings.'),
        processingLatencyP50Ms: int(100, 3_600_000)
          .default(5_000)
          .describe(
            'ProcessingLatency (received → processed) p50 above this, milliseconds: wake-ups are not working (the schedule alone gives ~30 s).',
          ),
        processingLatencyP99Ms: int(100, 3_600_000)
          .default(30_000)
          .describe('ProcessingLatency p99 above this, milliseconds: the worker does not keep up, or retries pile up.'),
        latencyMinSamples: int(1, 1_000_000)
          .default(50)
          .describe('Latency alarms look only at periods with at least this many processed rows: one slow retry is not a tail.'),
        evaluationPeriods: int(1, 100).default(1).describe('Consecutive 5-minute periods in breach before an alarm fires.'),
        heartbeatPeriods: int(1, 100)
          .default(2)
          .describe(
            "A scheduled function (each worker, the reaper, the relay) that has completed no invocation for this many periods (5 minutes, or its schedule's interval if longer) pages: its silence would otherwise hide everything it publishes.",
          ),
        functionThrottles: int(0, 1_000_000).default(0).describe('Throttled invocations of any function in a period.'),
        failedInvocations: int(0, 1_000_000)
          .default(0)
          .describe("Messages in the schedules' dead-letter queue or the failed-invocations queue."),
        databaseCapacityPercent: int(1, 100)
          .default(90)
          .describe('Aurora Serverless v2: capacity used, percent of the maximum ACU (ACUUtilization).'),
        databaseConnectionsPercent: int(1, 100)
          .default(80)
          .describe(
            "Connections, percent of the writer's max_connections (database.maxConnections, or Aurora's for the capacity range): the alarm's threshold and the stage's connection budget.",
          ),
        databaseMaxConnections: z.unknown().optional().describe('Moved to database.maxConnections: refused with that message.'),
        databaseFreeableMemoryPercent: int(1, 100)
          .default(10)
          .describe('Freeable memory below this percent of the memory at the maximum capacity.'),
      })
      .refine((a) => a.email === undefined || a.snsTopicArn === undefined, { message: 'set alarms.email or alarms.snsTopicArn, not both' })
      .refine((a) => a.databaseMaxConnections === undefined, {
        path: ['databaseMaxConnections'],
        message: 'moved to database.maxConnections (it sets the connection budget as well as the alarm)',
      })
      .prefault({}),
  })
  .superRefine((stage, ctx) => {
    if ((stage.account === undefined) !== (stage.region === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['account'], message: 'set both account and region, or neither' });
    }
    // With an explicit environment, a created VPC's zones would be looked up in the account:
    // synth would need credentials. Given here, it needs none.
    if (stage.region !== undefined && stage.network.kind === 'created' && stage.network.availabilityZones === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['network', 'availabilityZones'],
        message: `required when account and region are set (synth would look them up with credentials): e.g. ["${stage.region}a", "${stage.region}b"], as \`aws ec2 describe-availability-zones\` lists them`,
      });
    }
    if (stage.region !== undefined) {
      const elsewhere = (stage.network.availabilityZones ?? []).filter((az) => !az.startsWith(stage.region!));
      if (elsewhere.length > 0)
        ctx.addIssue({
          code: 'custom',
          path: ['network', 'availabilityZones'],
          message: `not in ${stage.region}: ${elsewhere.join(', ')}`,
        });
    }
  });

export type ConsumerSettings = z.output<typeof consumerSettings>;
export type StageSettings = z.output<typeof stageSchema>;

/** One consumer's effective settings in a stage: the declaration merged with the stage's overrides. */
export interface ConsumerStageConfig extends ConsumerSettings {
  name: string;
  mode: 'deferred' | 'inline';
  topics: string[];
  /** The consumer group of each topic's event-source mapping. */
  consumerGroupIds: Record<string, string>;
  /** The registry every mapping of this consumer validates against: the stage's, else the declaration's. */
  schemaRegistry?: SchemaRegistry;
  /** The topics its emitted events are published to by the relay (none: it emits nothing). */
  outboxTopics: string[];
  /** The key of the consumer stack it is deployed in. */
  stack: string;
  /** The module that declares it, when not registered in functions/consumers/index.ts (tests). */
  source?: ConsumerSource;
}

export interface StageConfig extends Omit<StageSettings, 'consumers' | 'consumerDefaults'> {
  stage: string;
  consumers: ConsumerStageConfig[];
  /** Every declared consumer's data (enabled in this stage or not): what the platform's functions read. */
  manifest: ConsumerManifest;
}

/**
 * What the infrastructure reads of a consumer declaration: its data (the manifest's fields,
 * functions/framework/manifest.ts), never its handlers.
 */
export interface DeclaredConsumer extends ConsumerManifestEntry {
  schemaRegistry?: SchemaRegistryDeclaration;
  /** The module that declares it; default: the one functions/consumers/index.ts imports it from. */
  source?: ConsumerSource;
}

/**
 * Where each consumer of a stage was deployed, as committed (cdk.json, context
 * "consumerStacks"): consumer name → stack key. Synth refuses a consumer whose stack differs
 * from its record unless the stage acknowledges the move (movedFrom).
 */
export type RecordedPlacements = Readonly<Record<string, string>>;

/**
 * Lambda requires a consumer group id to be unique among the account's Kafka event sources,
 * so a consumer that reads several topics gets one group per topic.
 */
function groupIds(base: string, topics: string[]): Record<string, string> {
  if (topics.length === 1) return { [topics[0]!]: base };
  return Object.fromEntries(topics.map((t) => [t, `${base}.${t}`.slice(0, 200)]));
}

/** The stage's settings but its consumers: what each consumer's checks read. */
type StageRest = Omit<StageSettings, 'consumers' | 'consumerDefaults'>;

/**
 * Validate the raw context of one stage against the declared consumers. Throws
 * StageConfigError listing every problem with its context path.
 */
export function parseStageConfig(
  stage: string,
  raw: unknown,
  declared: readonly DeclaredConsumer[],
  recorded: RecordedPlacements = {},
): StageConfig {
  const result = stageSchema.safeParse(raw ?? {});
  const problems: string[] = [];
  if (!result.success) {
    for (const issue of result.error.issues) {
      problems.push(`stages.${stage}${issue.path.length > 0 ? '.' : ''}${issue.path.join('.')}: ${issue.message}`);
    }
    throw new StageConfigError(`Invalid stage configuration "${stage}":\n  ${problems.join('\n  ')}`);
  }
  const { consumers: overrides, consumerDefaults, ...rest } = result.data;
  problems.push(...unknownConsumerProblems(stage, overrides, declared));
  problems.push(...declarationProblems(declared, { sharedTables: rest.sharedTables }).map((p) => `consumer declarations: ${p}`));
  problems.push(...runnerTimingProblems(stage, rest));

  const consumers: ConsumerStageConfig[] = [];
  const context: ConsumerContext = { stage, rest, consumerDefaults, recorded, seenGroups: new Map<string, string>() };
  for (const declaration of declared) {
    const consumer = consumerConfig(context, declaration, overrides[declaration.name] ?? { enabled: true }, problems);
    if (consumer !== undefined) consumers.push(consumer);
  }
  if (consumers.length === 0) problems.push(`stages.${stage}.consumers: every consumer is disabled; nothing to deploy`);
  problems.push(...sessionBoundProblems(stage, consumers, rest));
  problems.push(...stackSizeProblems(stage, consumers, rest.maxConsumersPerStack));
  problems.push(...concurrencyProblems(stage, consumers, rest.quotas));
  problems.push(...pollerGroupProblems(stage, consumers));
  problems.push(...brokerRouteProblems(stage, consumers, rest));
  if (consumers.length > 0) problems.push(...connectionBudgetProblems(stage, connectionBudget({ stage, ...rest, consumers })));

  if (problems.length > 0) {
    throw new StageConfigError(`Invalid stage configuration "${stage}":\n  ${problems.join('\n  ')}`);
  }
  return { stage, ...rest, consumers, manifest: manifestOf(declared, { sharedTables: rest.sharedTables }) };
}

/** A stage's consumer overrides must each name a declared consumer. */
function unknownConsumerProblems(stage: string, overrides: StageSettings['consumers'], declared: readonly DeclaredConsumer[]): string[] {
  const known = new Set(declared.map((c) => c.name));
  return Object.keys(overrides)
    .filter((name) => !known.has(name))
    .map((name) => `stages.${stage}.consumers.${name}: no consumer declaration has this name (known: ${[...known].join(', ')})`);
}

/**
 * The reaper's and the relay's timeouts against their safety margins and the relay's lease;
 * every margin against its role's statement_timeout (functions/lib/session-settings.ts), so
 * that a statement started before the margin ends (57014) before the invocation does.
 */
function runnerTimingProblems(stage: string, rest: StageRest): string[] {
  const problems: string[] = [];
  for (const fn of ['worker', 'reaper', 'relay'] as const) {
    const statementSeconds = SESSION_TIMEOUTS[fn].statementMs / 1000;
    if (rest[fn].safetyMarginSeconds < statementSeconds) {
      problems.push(
        `stages.${stage}.${fn}.safetyMarginSeconds: at least ${statementSeconds} s, the ${fn} role's statement_timeout: a statement started just before the margin must end before the invocation does`,
      );
    }
  }
  // A reaper or relay whose timeout is not above its safety margin would start no batch at all.
  for (const fn of ['reaper', 'relay'] as const) {
    if (rest[fn].timeoutSeconds <= rest[fn].safetyMarginSeconds) {
      problems.push(`stages.${stage}.${fn}: timeoutSeconds must exceed ${fn}.safetyMarginSeconds (${rest[fn].safetyMarginSeconds})`);
    }
  }
  // As for the workers: a lane's lease must outlive any relay invocation that holds it.
  if (rest.relay.timeoutSeconds + rest.relay.safetyMarginSeconds >= rest.relay.leaseSeconds) {
    problems.push(
      `stages.${stage}.relay: timeoutSeconds + safetyMarginSeconds must be below relay.leaseSeconds (${rest.relay.leaseSeconds})`,
    );
  }
  return problems;
}

/** The reaper ends consumer roles' transactions past its bound: no consumer function may legitimately run that long. */
function sessionBoundProblems(stage: string, consumers: ConsumerStageConfig[], rest: StageRest): string[] {
  const bound = rest.reaper.consumerSessionBoundSeconds;
  const longest = Math.max(rest.relay.timeoutSeconds, ...consumers.flatMap((c) => [c.ingestTimeoutSeconds, c.workerTimeoutSeconds]));
  return bound > longest
    ? []
    : [`stages.${stage}.reaper.consumerSessionBoundSeconds: must exceed every consumer function's timeout (the longest is ${longest} s)`];
}

/** What every consumer's config is checked against; seenGroups collects the consumer groups taken so far. */
interface ConsumerContext {
  stage: string;
  rest: StageRest;
  consumerDefaults: StageSettings['consumerDefaults'];
  recorded: RecordedPlacements;
  seenGroups: Map<string, string>;
}

/**
 * One declared consumer's config in this stage, its defaults and overrides merged; undefined
 * when the stage disables it. Its problems are appended to `problems`.
 */
function consumerConfig(
  context: ConsumerContext,
  declaration: DeclaredConsumer,
  override: StageSettings['consumers'][string],
  problems: string[],
): ConsumerStageConfig | undefined {
  const { stage, rest, seenGroups } = context;
  const {
    topics: topicOverride,
    consumerGroupId,
    enabled,
    schemaRegistry: registryOverride,
    stack: stackOverride,
    movedFrom,
    ...settings
  } = override;
  if (!enabled) return undefined;
  const merged: ConsumerSettings = { ...context.consumerDefaults, ...stripUndefined(settings) };
  const topics = topicOverride ?? [...declaration.topics];
  const path = `stages.${stage}.consumers.${declaration.name}`;
  problems.push(...workerProblems(path, merged, rest));
  const consumerGroupIds = groupIds(consumerGroupId ?? declaration.name, topics);
  for (const [topic, group] of Object.entries(consumerGroupIds)) {
    const owner = seenGroups.get(group);
    if (owner !== undefined) problems.push(`${path}: consumer group "${group}" is also used by ${owner}`);
    seenGroups.set(group, `${declaration.name}/${topic}`);
  }
  const stack = stackOverride ?? declaration.stack ?? DEFAULT_CONSUMER_STACK;
  problems.push(...placementProblems(path, declaration, stack, context.recorded[declaration.name], movedFrom));
  const schemaRegistry = registryOverride ?? declaredRegistry(declaration, problems);
  if (schemaRegistry !== undefined) problems.push(...registryProblems(path, schemaRegistry, rest));
  return {
    ...merged,
    name: declaration.name,
    mode: declaration.mode,
    topics,
    consumerGroupIds,
    ...(schemaRegistry === undefined ? {} : { schemaRegistry }),
    outboxTopics: [...new Set(Object.values(declaration.emits ?? {}).map((e) => e.topic))].sort(),
    stack,
    ...(declaration.source === undefined ? {} : { source: declaration.source }),
  };
}

/** A consumer's pollers, and its worker's timeout against the lease, the margin and its concurrency. */
function workerProblems(path: string, merged: ConsumerSettings, rest: StageRest): string[] {
  const problems: string[] = [];
  if (merged.minPollers > merged.maxPollers) problems.push(`${path}: minPollers must not exceed maxPollers`);
  // The worker must finish (and release what it claimed) well before its lease could expire,
  // or the reaper would hand a live worker's rows to another worker.
  if (merged.workerTimeoutSeconds + rest.worker.safetyMarginSeconds >= rest.worker.leaseSeconds) {
    problems.push(
      `${path}: workerTimeoutSeconds + worker.safetyMarginSeconds must be below worker.leaseSeconds (${rest.worker.leaseSeconds})`,
    );
  }
  if (merged.workerTimeoutSeconds <= rest.worker.safetyMarginSeconds) {
    problems.push(`${path}: workerTimeoutSeconds must exceed worker.safetyMarginSeconds`);
  }
  // Fan-out would invoke workers that Lambda throttles: the slots and the concurrency disagree.
  if (typeof merged.workerReservedConcurrency === 'number' && merged.workerReservedConcurrency < merged.workerMaxConcurrency) {
    problems.push(`${path}: workerReservedConcurrency must be at least workerMaxConcurrency (${merged.workerMaxConcurrency}), or false`);
  }
  return problems;
}

/**
 * A consumer's stack is a stable choice: moving it deletes its functions, mappings and
 * schedule in one stack and creates them in another (its mappings start again from the
 * consumer group's committed offsets; its alarms and dashboard rows start empty). So a
 * stack that differs from the recorded one is refused unless the stage says movedFrom.
 */
function placementProblems(
  path: string,
  declaration: DeclaredConsumer,
  stack: string,
  recorded: string | undefined,
  movedFrom: string | undefined,
): string[] {
  const problems: string[] = [];
  if (!CONSUMER_STACK_KEY.test(stack))
    problems.push(`consumer declaration ${declaration.name}: stack "${stack}" ${CONSUMER_STACK_KEY_RULE}`);
  if (declaration.name.length > MAX_CONSUMER_NAME) {
    problems.push(
      `consumer declaration ${declaration.name}: the name is longer than ${MAX_CONSUMER_NAME} characters (its worker schedule is worker-<name>, 64 at most)`,
    );
  }
  if (movedFrom !== undefined && movedFrom !== recorded) {
    problems.push(
      `${path}.movedFrom: "${movedFrom}" is not where it is recorded (${recorded === undefined ? 'no record' : `"${recorded}"`}); remove movedFrom`,
    );
  } else if (recorded !== undefined && recorded !== stack && movedFrom === undefined) {
    problems.push(
      `${path}: moves from consumer stack "${recorded}" to "${stack}", which replaces its functions, event-source mappings and schedule. ` +
        `If that is meant, set ${path}.movedFrom to "${recorded}" for the deploy that moves it, then record "${stack}" under consumerStacks and remove movedFrom (docs/stacks.md "Moving a consumer"); else keep it in "${recorded}"`,
    );
  }
  return problems;
}

/** A consumer stack holds at most maxConsumersPerStack consumers, so that its template stays within CloudFormation's limits. */
function stackSizeProblems(stage: string, consumers: ConsumerStageConfig[], max: number): string[] {
  const byStack = new Map<string, string[]>();
  for (const c of consumers) byStack.set(c.stack, [...(byStack.get(c.stack) ?? []), c.name]);
  return [...byStack].flatMap(([stack, names]) =>
    names.length <= max
      ? []
      : [
          `stages.${stage}: consumer stack "${stack}" would hold ${names.length} consumers, at most ${max} fit one stack: ` +
            `give the consumers added last (${names.slice(max).join(', ')}) another stack, in their declaration (stack: "...") or under stages.${stage}.consumers.<name>.stack (docs/stacks.md)`,
        ],
  );
}

/** The worker's reserved concurrency in Lambda: undefined when none is reserved. */
export function reservedConcurrencyOf(
  consumer: Pick<ConsumerSettings, 'workerReservedConcurrency' | 'workerMaxConcurrency'>,
): number | undefined {
  if (consumer.workerReservedConcurrency === false) return undefined;
  return consumer.workerReservedConcurrency === true ? consumer.workerMaxConcurrency + 1 : consumer.workerReservedConcurrency;
}

/** Lambda refuses a reservation that leaves fewer than this many of the account's executions unreserved. */
export const LAMBDA_UNRESERVED_MINIMUM = 100;

/**
 * Reserved concurrency must fit the account: a deploy that leaves fewer than 100 unreserved
 * executions fails in the middle of the stateless stack. A reservation is therefore checked
 * here, against the quota the stage declares, and refused without one.
 */
function concurrencyProblems(stage: string, consumers: ConsumerStageConfig[], quotas: StageSettings['quotas']): string[] {
  const reserved = consumers.flatMap((c) => {
    const n = reservedConcurrencyOf(c);
    return n === undefined ? [] : [{ name: c.name, n }];
  });
  if (reserved.length === 0) return [];
  const total = reserved.reduce((sum, r) => sum + r.n, 0);
  const needed = total + LAMBDA_UNRESERVED_MINIMUM;
  const itemized = reserved.map((r) => `${r.name} ${r.n}`).join(', ');
  const quota = quotas.lambdaConcurrentExecutions;
  if (quota === undefined) {
    return [
      `stages.${stage}.quotas.lambdaConcurrentExecutions: required when workers reserve concurrency (${itemized}): declare the account's quota (\`aws lambda get-account-settings\`, AccountLimit.ConcurrentExecutions), or set workerReservedConcurrency to false`,
    ];
  }
  if (needed <= quota) return [];
  return [
    `stages.${stage}.quotas.lambdaConcurrentExecutions: the workers reserve ${total} (${itemized}) and Lambda keeps ${LAMBDA_UNRESERVED_MINIMUM} unreserved: the account needs a quota of at least ${needed}, it has ${quota}. Set workerReservedConcurrency to false (or lower it) for some consumers, or have the quota raised (Service Quotas, "Concurrent executions") and declare the new value`,
  ];
}

/** Lambda's limits on a provisioned poller group: 100 mappings, 2000 pollers at most together. */
function pollerGroupProblems(stage: string, consumers: ConsumerStageConfig[]): string[] {
  const groups = new Map<string, { mappings: number; maxPollers: number }>();
  for (const c of consumers) {
    if (c.pollerGroupName === undefined) continue;
    const g = groups.get(c.pollerGroupName) ?? { mappings: 0, maxPollers: 0 };
    g.mappings += c.topics.length;
    g.maxPollers += c.topics.length * c.maxPollers;
    groups.set(c.pollerGroupName, g);
  }
  return [...groups].flatMap(([name, g]) => [
    ...(g.mappings > 100 ? [`stages.${stage}: poller group "${name}" has ${g.mappings} mappings; Lambda allows 100 per group`] : []),
    ...(g.maxPollers > 2000
      ? [`stages.${stage}: poller group "${name}" adds up to ${g.maxPollers} maxPollers; Lambda allows 2000 per group`]
      : []),
  ]);
}

/**
 * The outbox relay produces to the brokers from the functions' subnets. A VPC this stack
 * creates has no route anywhere, so an existing cluster is out of its reach unless the
 * stage gives brokers that are reachable from it (MSK multi-VPC private connectivity).
 */
function brokerRouteProblems(
  stage: string,
  consumers: ConsumerStageConfig[],
  settings: Omit<StageSettings, 'consumers' | 'consumerDefaults'>,
): string[] {
  const relayDeployed = consumers.some((c) => c.outboxTopics.length > 0);
  if (
    !relayDeployed ||
    settings.msk.clusterArn === undefined ||
    settings.network.kind === 'existing' ||
    settings.relay.bootstrapBrokers !== undefined
  )
    return [];
  return [
    `stages.${stage}.network: the outbox relay produces to msk.clusterArn from the stage's subnets, and a VPC this stack creates has no route to it: set network.vpcId, subnetIds and availabilityZones to the cluster's VPC (or subnets routed to it), or relay.bootstrapBrokers to brokers this VPC reaches (MSK multi-VPC private connectivity)`,
  ];
}

/** The declaration's registry, validated by the same schema as a stage's (a typo in code fails synth too). */
function declaredRegistry(declaration: DeclaredConsumer, problems: string[]): SchemaRegistry | undefined {
  if (declaration.schemaRegistry === undefined) return undefined;
  const parsed = schemaRegistrySchema.safeParse(declaration.schemaRegistry);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    problems.push(
      `consumer declaration ${declaration.name}: schemaRegistry${issue.path.map((p) => `.${String(p)}`).join('')}: ${issue.message}`,
    );
  }
  return undefined;
}

/** What the schema alone cannot see: the registry against the stage it is deployed in. */
function registryProblems(path: string, registry: SchemaRegistry, stage: Omit<StageSettings, 'consumers' | 'consumerDefaults'>): string[] {
  const problems: string[] = [];
  if (registry.type === 'glue' && stage.account !== undefined && stage.region !== undefined) {
    // CDK's GlueSchemaRegistry grants glue:GetSchemaVersion on schemas of the stack's own
    // account and region; a registry elsewhere would deploy and then fail every poll.
    const [, region, account] = GLUE_REGISTRY_ARN.exec(registry.registryArn)!;
    if (region !== stage.region || account !== stage.account) {
      problems.push(`${path}.schemaRegistry.registryArn: must be in the stage's account and region (${stage.account}, ${stage.region})`);
    }
  }
  if (registry.type === 'confluent' && stage.msk.createDevCluster) {
    // The mapping's pollers reach the registry from the cluster's subnets: the dev cluster's
    // are isolated (no NAT), so every poll would fail to fetch a schema.
    problems.push(
      `${path}.schemaRegistry: a Confluent registry needs a route from the cluster's subnets; the dev cluster's VPC has none (use msk.clusterArn)`,
    );
  }
  return problems;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
