/**
 * Configuration, parsed once from the environment at cold start.
 *
 * This module and `cdk/app.ts` are the only places that read the environment. Every
 * setting has a named default; a missing or malformed variable fails at start with the
 * variable's name in the message, never later in the middle of a batch.
 */
import { z } from 'zod';
import { databaseConfig, databaseEnv, refineDatabaseEnv, type DatabaseConfig } from './config-database';
import {
  ingestConfig,
  ingestEnv,
  reaperConfig,
  reaperEnv,
  wakeUpsConfig,
  workerConfig,
  workerEnv,
  type IngestConfig,
  type ReaperConfig,
  type WakeUpsConfig,
  type WorkerConfig,
} from './config-functions';
import { opsConfig, opsEnv, schedulerConfig, type OpsConfig, type SchedulerConfig } from './config-ops';
import { kafkaConfig, relayConfig, relayEnv, type KafkaConfig, type RelayConfig } from './config-relay';
import { DEFAULTS } from './config-defaults';
import { logLevel } from './env-values';
import type { TracingConfig } from './tracing';

/**
 * OpenTelemetry's own variables that decide whether the SDK loads at all, and which OTLP
 * exporter (lib/tracing.ts); the SDK reads the rest itself. Only OTLP over HTTP is built in.
 */
const tracingEnv = {
  OTEL_TRACES_EXPORTER: z
    .enum(['otlp', 'none'], { message: 'otlp or none (the functions export spans over OTLP/HTTP only)' })
    .optional()
    .describe('otlp loads the tracing SDK and exports spans over OTLP/HTTP (docs/tracing.md); unset or none: no SDK is loaded.'),
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).optional().describe('true: no tracing SDK, whatever OTEL_TRACES_EXPORTER says.'),
  OTEL_EXPORTER_OTLP_PROTOCOL: z
    .enum(['http/protobuf', 'http/json'], { message: 'http/protobuf or http/json' })
    .optional()
    .describe('The OTLP/HTTP body encoding: http/protobuf (the default) or http/json.'),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z
    .enum(['http/protobuf', 'http/json'], { message: 'http/protobuf or http/json' })
    .optional()
    .describe('The same for traces only; wins over OTEL_EXPORTER_OTLP_PROTOCOL.'),
};

function tracingConfig(e: z.infer<z.ZodObject<typeof tracingEnv>>): TracingConfig {
  return {
    exporter: e.OTEL_SDK_DISABLED === 'true' ? 'none' : (e.OTEL_TRACES_EXPORTER ?? 'none'),
    // The specification's default protocol.
    protocol: e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
  };
}

// The settings' defaults are part of this module's surface: callers read them as config's.
export { DEFAULTS } from './config-defaults';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export type Env = Record<string, string | undefined>;

/**
 * The variables, each with its default, by the function kind that reads them. Unset and
 * empty values take the default; a set value that does not parse is an error naming the
 * variable.
 */
export const ENVIRONMENT = z.object({
  ...databaseEnv,
  CONSUMER_NAME: z.string().trim().min(1).optional().describe('The consumer declaration an ingest, worker or relay function serves.'),
  ...ingestEnv,
  ...workerEnv,
  ...reaperEnv,
  ...relayEnv,
  ...opsEnv,
  ...tracingEnv,
  METRICS_NAMESPACE: z.string().trim().min(1).default(DEFAULTS.metricsNamespace).describe('The CloudWatch namespace of the metrics.'),
  SERVICE_NAME: z
    .string()
    .trim()
    .min(1)
    .default(DEFAULTS.serviceName)
    .describe('The service dimension of the metrics and the service of the logs.'),
  /*
   * The log level is Powertools Logger's to read, as it documents. They are parsed here
   * only so that a typo fails the cold start naming the variable: the Logger would
   * quietly log at INFO.
   */
  POWERTOOLS_LOG_LEVEL: logLevel
    .optional()
    .describe("Read by Powertools Logger after Lambda's AWS_LAMBDA_LOG_LEVEL (which the CDK app sets); INFO when neither is set."),
  LOG_LEVEL: logLevel.optional().describe('Read by Powertools Logger after POWERTOOLS_LOG_LEVEL.'),
});

const schema = ENVIRONMENT.superRefine(refineDatabaseEnv);

/**
 * Variables the CDK app sets that the functions' code does not parse: Node.js, Lambda,
 * Powertools or the OpenTelemetry SDK read them. Listed so that the configuration reference
 * names every variable a function is given (test/cdk/environment-documented.test.ts).
 */
export const READ_BY_OTHERS: Readonly<Record<string, { readBy: string; description: string }>> = {
  NODE_EXTRA_CA_CERTS: {
    readBy: 'Node.js',
    description:
      "The RDS certificate authorities: /var/runtime/ca-cert.pem, the Lambda runtime's Amazon bundle (Node.js 20 and later runtimes no longer load it by default). Not set behind RDS Proxy, whose certificate chains to public roots.",
  },
  AWS_LAMBDA_LOG_LEVEL: {
    readBy: 'Lambda, Powertools Logger',
    description: "The functions' application log level, from the stage's observability.logLevel (Lambda's logging configuration).",
  },
  POWERTOOLS_SERVICE_NAME: { readBy: 'Powertools', description: 'The same as SERVICE_NAME, for Powertools.' },
  POWERTOOLS_METRICS_NAMESPACE: { readBy: 'Powertools Metrics', description: 'The same as METRICS_NAMESPACE, for Powertools.' },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    readBy: 'OpenTelemetry SDK',
    description: "Where spans go: the stage's otlp endpoint, or the collector extension on http://localhost:4318 (docs/tracing.md).",
  },
  OTEL_TRACES_SAMPLER: { readBy: 'OpenTelemetry SDK', description: "The stage's tracing sampler (docs/tracing.md)." },
  OTEL_TRACES_SAMPLER_ARG: { readBy: 'OpenTelemetry SDK', description: 'The ratio of a traceidratio sampler.' },
  OPENTELEMETRY_COLLECTOR_CONFIG_URI: {
    readBy: 'the collector extension',
    description: "The collector's configuration, with the stage's collector-layer tracing and a configUri.",
  },
};

export interface Config extends IngestConfig, OpsConfig {
  database: DatabaseConfig;
  consumerName?: string;
  worker: WorkerConfig;
  wakeUps: WakeUpsConfig;
  reaper: ReaperConfig;
  relay: RelayConfig;
  kafka: KafkaConfig;
  scheduler: SchedulerConfig;
  observability: { metricsNamespace: string; serviceName: string };
  tracing: TracingConfig;
}

/** Parse a configuration from an environment-shaped record. Throws ConfigError naming every bad variable. */
export function parseConfig(env: Env): Config {
  // Empty strings mean "unset": CDK and shells often pass them for optional settings.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''));
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `${issue.path.join('.') || '(environment)'}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration: ${problems.join('; ')}`);
  }
  const e = result.data;
  return {
    database: databaseConfig(e),
    ...(e.CONSUMER_NAME !== undefined ? { consumerName: e.CONSUMER_NAME } : {}),
    ...ingestConfig(e),
    worker: workerConfig(e),
    wakeUps: wakeUpsConfig(e),
    reaper: reaperConfig(e),
    ...opsConfig(e),
    relay: relayConfig(e),
    kafka: kafkaConfig(e),
    scheduler: schedulerConfig(e),
    observability: { metricsNamespace: e.METRICS_NAMESPACE, serviceName: e.SERVICE_NAME },
    tracing: tracingConfig(e),
  };
}

/** A configuration that must name a consumer (ingest and worker functions). */
export function requireConsumerName(config: Config): string {
  if (config.consumerName === undefined) {
    throw new ConfigError('Invalid configuration: CONSUMER_NAME: required for this function');
  }
  return config.consumerName;
}

/**
 * The consumer a function's bundle was built for (cdk/function-entries.ts), which its
 * CONSUMER_NAME must name: a bundle serves its own consumer only.
 */
export function requireOwnConsumer<C extends { name: string }>(config: Config, consumer: C): C {
  const name = requireConsumerName(config);
  if (name !== consumer.name) {
    throw new ConfigError(`Invalid configuration: CONSUMER_NAME: "${name}", but this function is built for consumer "${consumer.name}"`);
  }
  return consumer;
}

/** The producer settings the relay function needs: brokers and the signing region. */
export function requireKafka(config: Config): Config['kafka'] & { brokers: string[]; region: string } {
  const { brokers, region } = config.kafka;
  const missing = [...(brokers === undefined ? ['KAFKA_BROKERS'] : []), ...(region === undefined ? ['AWS_REGION'] : [])];
  if (missing.length > 0) {
    throw new ConfigError(`Invalid configuration: ${missing.map((m) => `${m}: required for the relay`).join('; ')}`);
  }
  return { ...config.kafka, brokers: brokers!, region: region! };
}

let cached: Config | undefined;

/** The process's configuration, parsed from process.env on first use and then kept. */
export function loadConfig(): Config {
  cached ??= parseConfig(process.env);
  return cached;
}
