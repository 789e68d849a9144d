/**
 * The defaults every function of the system shares: bundled by the local esbuild (never
 * Docker), ESM, minified, arm64 on a current Node.js runtime, in the private subnets, with
 * its own log group and retention, the Powertools environment and the database settings
 * the functions' config module (functions/lib/config.ts) parses at cold start: its own
 * database role and IAM authentication, or (the migration function) the master secret.
 */
import { isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, NodejsFunction, OutputFormat, type ICommandHooks } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as rds from 'aws-cdk-lib/aws-rds';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { type Construct } from 'constructs';
import { sessionKindOf, type DatabaseRole } from '../../functions/lib/database-roles';
import { queryBoundMs, type SessionKind } from '../../functions/lib/session-settings';
import type { TracingStage } from '../config';
import { POOL_MAX } from '../connection-budget';
import { grantConnect, type DatabaseConnection } from '../stacks/stage-references';
import { assertDependenciesPatched } from './dependency-patches';
import { acknowledge } from './nag';

/** The repository root: entries, the lock file and migrations/ are resolved from it. */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export const RUNTIME = lambda.Runtime.NODEJS_24_X;

/** The database the functions connect to. */
export interface DatabasePlatform {
  /** The cluster, for its metrics. */
  cluster: rds.IDatabaseCluster;
  /** The master user's secret: the migration function's, and only its. */
  masterSecret: secretsmanager.ISecret;
  databaseName: string;
  /** Where the runtime functions connect: RDS Proxy when there is one (IAM authentication on the proxy too), else the cluster. */
  connection: DatabaseConnection;
}

/** What the functions need to reach the database and report; shared by every InboxFunction. */
export interface FunctionPlatform {
  vpc: ec2.IVpc;
  subnets: ec2.SubnetSelection;
  securityGroup: ec2.ISecurityGroup;
  /** The second group of the functions that produce to Kafka: the brokers admit it. */
  kafkaClientSecurityGroup: ec2.ISecurityGroup;
  database: DatabasePlatform;
  observability: {
    metricsNamespace: string;
    serviceName: string;
    logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
    logRetentionDays: logs.RetentionDays;
    tracing: TracingStage;
  };
}

/**
 * How a function authenticates to the database: as its own role with IAM tokens (every
 * runtime function), or as the master user with the cluster's secret (the migration
 * function alone: it creates and owns the schema and the roles).
 */
export type DatabaseAccess = { role: DatabaseRole } | { masterSecret: true };

/**
 * Lambda's Node.js 20+ runtimes no longer load Amazon's CA certificates by default; this
 * file has them, the RDS certificate authorities included (the cluster's own certificate).
 * RDS Proxy presents an ACM certificate under Amazon's public roots, in Node's own store.
 */
export const LAMBDA_AMAZON_CA_BUNDLE = '/var/runtime/ca-cert.pem';

export interface InboxFunctionProps {
  platform: FunctionPlatform;
  /** The entry module's path (cdk/function-entries.ts writes them), absolute or relative to the repository root. */
  entry: string;
  description: string;
  memorySize?: number;
  timeout: Duration;
  environment?: Record<string, string>;
  database: DatabaseAccess;
  commandHooks?: ICommandHooks;
  reservedConcurrentExecutions?: number;
  /** Talks to the Kafka brokers: the function gets the platform's Kafka client group too. */
  kafkaClient?: boolean;
}

// ESM output: some dependencies still call require() for Node built-ins.
const REQUIRE_BANNER = "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);";

/**
 * How every function is bundled, in esbuild's terms. NodejsFunction takes them below, and
 * test/db/bundles.test.ts builds the same bundles with esbuild and runs them, so what ships
 * is what was run.
 */
export const BUNDLE = {
  format: 'esm',
  target: 'node24',
  platform: 'node',
  mainFields: ['module', 'main'],
  minify: true,
  banner: REQUIRE_BANNER,
  // The runtime ships the AWS SDK v3 clients; bundling them would only add size. Anything
  // else of the SDK (@aws-sdk/rds-signer) is bundled: the runtime does not promise it.
  external: ['@aws-sdk/client-*'],
  // The Kafka client's checksums and compression run in WebAssembly; the package's default
  // entry reads its .wasm file beside itself, which a bundle does not have. Its `bundled`
  // entry carries the same module inline.
  alias: { '@platformatic/wasm-utils': '@platformatic/wasm-utils/bundled' },
} as const;

/** The function's database settings and Powertools environment, before its own variables. */
function platformEnvironment(platform: FunctionPlatform, role: DatabaseRole | undefined): Record<string, string> {
  const { database } = platform;
  // The migration function goes to the cluster directly (its secret names the host): DDL,
  // and the master user, which the proxy does not serve.
  const connection = role !== undefined ? database.connection : undefined;
  const viaProxy = connection?.viaProxy === true;
  const kind: SessionKind = role !== undefined ? sessionKindOf(role) : 'migrate';
  return {
    ...(role !== undefined && connection !== undefined
      ? {
          // No password anywhere: the function signs an IAM token for its role per connection.
          DB_IAM_USER: role,
          DB_HOST: connection.hostname,
          DB_PORT: connection.port,
          DB_NAME: database.databaseName,
        }
      : // The secret's ARN only: the migration function reads the secret on each invocation.
        { DB_SECRET_ARN: database.masterSecret.secretArn }),
    DB_SSL: 'verify-full',
    // The client gives up on a statement its role's statement_timeout would have ended by now
    // (a dead peer); the timeouts themselves are the role's settings, not sent at connect.
    DB_QUERY_TIMEOUT_MS: String(queryBoundMs(kind)),
    // What the stage's connection budget counts for each of its containers.
    DB_POOL_MAX: String(POOL_MAX[kind]),
    ...(viaProxy ? {} : { NODE_EXTRA_CA_CERTS: LAMBDA_AMAZON_CA_BUNDLE }),
    // Named prepared statements pin an RDS Proxy session.
    DB_PREPARE: viaProxy ? 'false' : 'true',
    METRICS_NAMESPACE: platform.observability.metricsNamespace,
    SERVICE_NAME: platform.observability.serviceName,
    POWERTOOLS_SERVICE_NAME: platform.observability.serviceName,
    POWERTOOLS_METRICS_NAMESPACE: platform.observability.metricsNamespace,
  };
}

/**
 * OpenTelemetry's own variables for where the stage's spans go (docs/tracing.md); none when
 * tracing is off, so the functions load no SDK. A collector extension listens on localhost.
 */
export function tracingEnvironment(tracing: TracingStage): Record<string, string> {
  if (tracing.exporter === 'off') return {};
  return {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_PROTOCOL: tracing.protocol,
    OTEL_EXPORTER_OTLP_ENDPOINT: tracing.exporter === 'otlp' ? tracing.endpoint : 'http://localhost:4318',
    OTEL_TRACES_SAMPLER: tracing.sampler,
    ...(tracing.samplerArg !== undefined ? { OTEL_TRACES_SAMPLER_ARG: String(tracing.samplerArg) } : {}),
    ...(tracing.exporter === 'collector-layer' && tracing.configUri !== undefined
      ? { OPENTELEMETRY_COLLECTOR_CONFIG_URI: tracing.configUri }
      : {}),
  };
}

/**
 * A collector extension in the function, and what its default configuration (AWS X-Ray)
 * needs: X-Ray takes no resource-level permissions, so "*".
 */
function addTracingCollector(fn: NodejsFunction, tracing: TracingStage): void {
  if (tracing.exporter !== 'collector-layer') return;
  fn.addLayers(lambda.LayerVersion.fromLayerVersionArn(fn, 'TracingCollector', tracing.layerArn));
  fn.addToRolePolicy(new iam.PolicyStatement({ actions: [...TRACE_WRITE_ACTIONS], resources: ['*'] }));
  acknowledge(fn, [
    {
      id: 'AwsSolutions-IAM5',
      reason:
        "The tracing collector extension writes spans to AWS X-Ray, which has no resource-level permissions for them: X-Ray's write actions on *.",
      findings: ['Resource::*'],
    },
  ]);
}

/** What the collector's X-Ray exporters send with: segments and telemetry, sampling rules, and spans to CloudWatch's OTLP endpoint. */
export const TRACE_WRITE_ACTIONS = [
  'xray:PutTraceSegments',
  'xray:PutTelemetryRecords',
  'xray:GetSamplingRules',
  'xray:GetSamplingTargets',
  'xray:PutSpans',
] as const;

/** NodejsFunction's bundling options for BUNDLE, with the function's own command hooks. */
function bundlingOf(commandHooks: ICommandHooks | undefined): BundlingOptions {
  return {
    forceDockerBundling: false,
    format: OutputFormat.ESM,
    target: BUNDLE.target,
    platform: BUNDLE.platform,
    mainFields: [...BUNDLE.mainFields],
    minify: BUNDLE.minify,
    sourceMap: false,
    banner: BUNDLE.banner,
    externalModules: [...BUNDLE.external],
    esbuildArgs: { '--alias': Object.entries(BUNDLE.alias).map(([from, to]) => `${from}=${to}`) },
    ...(commandHooks ? { commandHooks } : {}),
  };
}

export class InboxFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: InboxFunctionProps) {
    const { platform } = props;
    // The bundle is made from node_modules: it must carry the fixes in patches/.
    assertDependenciesPatched(PROJECT_ROOT);
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: platform.observability.logRetentionDays,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const role = 'role' in props.database ? props.database.role : undefined;
    super(scope, id, {
      entry: isAbsolute(props.entry) ? props.entry : `${PROJECT_ROOT}${props.entry}`,
      handler: 'handler',
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: `${PROJECT_ROOT}package-lock.json`,
      description: props.description,
      runtime: RUNTIME,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 256,
      timeout: props.timeout,
      ...(props.reservedConcurrentExecutions !== undefined ? { reservedConcurrentExecutions: props.reservedConcurrentExecutions } : {}),
      vpc: platform.vpc,
      vpcSubnets: platform.subnets,
      securityGroups: [platform.securityGroup, ...(props.kafkaClient === true ? [platform.kafkaClientSecurityGroup] : [])],
      logGroup,
      // Lambda's advanced logging controls: the function's level is Lambda's to set (it
      // sets AWS_LAMBDA_LOG_LEVEL, which Powertools Logger honours first) and to filter.
      loggingFormat: lambda.LoggingFormat.JSON,
      applicationLogLevelV2: lambda.ApplicationLogLevel[platform.observability.logLevel],
      environment: { ...platformEnvironment(platform, role), ...tracingEnvironment(platform.observability.tracing), ...props.environment },
      bundling: bundlingOf(props.commandHooks),
    });
    addTracingCollector(this, platform.observability.tracing);
    if (role !== undefined) {
      // rds-db:connect for this role only, on the endpoint the function uses.
      grantConnect(this, platform.database.connection, role);
    } else {
      platform.database.masterSecret.grantRead(this);
    }

    acknowledge(this, [
      {
        id: 'AwsSolutions-IAM4',
        reason:
          'AWSLambdaBasicExecutionRole and AWSLambdaVPCAccessExecutionRole are the AWS-maintained minimum for a VPC function (ENI management, logs); their ENI actions cannot be scoped to resources.',
        findings: [
          'Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole',
          'Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole',
        ],
      },
    ]);
  }
}
