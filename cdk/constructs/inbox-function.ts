/**
 * The defaults every function of the system shares: bundled by the local esbuild (never
 * Docker), ESM, minified, arm64 on a current Node.js runtime, in the private subnets, with
 * its own log group and retention, the Powertools environment and the database settings
 * the functions' config module (functions/lib/config.ts) parses at cold start.
 */
import { fileURLToPath } from 'node:url';
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat, type ICommandHooks } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { acknowledge } from './nag';

/** The repository root: entries, the lock file and migrations/ are resolved from it. */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export const RUNTIME = lambda.Runtime.NODEJS_24_X;

/** What the functions need to reach the database and report; shared by every InboxFunction. */
export interface FunctionPlatform {
  vpc: ec2.IVpc;
  subnets: ec2.SubnetSelection;
  securityGroup: ec2.ISecurityGroup;
  databaseSecret: secretsmanager.ISecret;
  /** The RDS Proxy endpoint, when there is one. */
  proxyEndpoint?: string;
  observability: { metricsNamespace: string; serviceName: string; logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR'; logRetentionDays: logs.RetentionDays };
}

export interface InboxFunctionProps {
  platform: FunctionPlatform;
  /** Relative to the repository root, e.g. functions/ingest/handler.ts. */
  entry: string;
  description: string;
  memorySize?: number;
  timeout: Duration;
  environment?: Record<string, string>;
  /** false: connect to the cluster directly even when a proxy exists (the migration runner). */
  useProxy?: boolean;
  commandHooks?: ICommandHooks;
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
  // The runtime ships AWS SDK v3; bundling it would only add size.
  external: ['@aws-sdk/*'],
} as const;

export class InboxFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: InboxFunctionProps) {
    const { platform } = props;
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: platform.observability.logRetentionDays,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const viaProxy = platform.proxyEndpoint !== undefined && props.useProxy !== false;
    super(scope, id, {
      entry: `${PROJECT_ROOT}${props.entry}`,
      handler: 'handler',
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: `${PROJECT_ROOT}package-lock.json`,
      description: props.description,
      runtime: RUNTIME,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize ?? 256,
      timeout: props.timeout,
      vpc: platform.vpc,
      vpcSubnets: platform.subnets,
      securityGroups: [platform.securityGroup],
      logGroup,
      // Lambda's advanced logging controls: the function's level is Lambda's to set (it
      // sets AWS_LAMBDA_LOG_LEVEL, which Powertools Logger honours first) and to filter.
      loggingFormat: lambda.LoggingFormat.JSON,
      applicationLogLevelV2: lambda.ApplicationLogLevel[platform.observability.logLevel],
      environment: {
        // The secret's ARN only: the function reads the secret at cold start.
        DB_SECRET_ARN: platform.databaseSecret.secretArn,
        DB_SSL: 'require',
        // Named prepared statements pin an RDS Proxy session.
        DB_PREPARE: viaProxy ? 'false' : 'true',
        ...(viaProxy ? { DB_HOST: platform.proxyEndpoint! } : {}),
        METRICS_NAMESPACE: platform.observability.metricsNamespace,
        SERVICE_NAME: platform.observability.serviceName,
        POWERTOOLS_SERVICE_NAME: platform.observability.serviceName,
        POWERTOOLS_METRICS_NAMESPACE: platform.observability.metricsNamespace,
        ...props.environment,
      },
      bundling: {
        forceDockerBundling: false,
        format: OutputFormat.ESM,
        target: BUNDLE.target,
        platform: BUNDLE.platform,
        mainFields: [...BUNDLE.mainFields],
        minify: BUNDLE.minify,
        sourceMap: false,
        banner: BUNDLE.banner,
        externalModules: [...BUNDLE.external],
        ...(props.commandHooks ? { commandHooks: props.commandHooks } : {}),
      },
    });
    platform.databaseSecret.grantRead(this);

    acknowledge(
      this,
      [
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

/** Retention days as the CDK enum (the stage config validates the allowed values). */
export function retentionDays(days: number): logs.RetentionDays {
  return days as logs.RetentionDays;
}

