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
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'none'], { message: 'otlp or none (the functions export spans over OTLP/HTTP only)' }).optional(),
  OTEL_SDK_DISABLED: z.enum(['true', 'false']).optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(['http/protobuf', 'http/json'], { message: 'http/protobuf or http/json' }).optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.enum(['http/protobuf', 'http/json'], { message: 'http/protobuf or http/json' }).optional(),
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
const schema = z
  .object({
    ...databaseEnv,
    /** Which consumer declaration this function serves (ingest and worker). */
    CONSUMER_NAME: z.string().trim().min(1).optional(),
    ...ingestEnv,
    ...workerEnv,
    ...reaperEnv,
    ...relayEnv,
    ...opsEnv,
    ...tracingEnv,
    METRICS_NAMESPACE: z.string().trim().min(1).default(DEFAULTS.metricsNamespace),
    SERVICE_NAME: z.string().trim().min(1).default(DEFAULTS.serviceName),
    /**
     * The log level is Powertools Logger's to read, as it documents: AWS_LAMBDA_LOG_LEVEL
     * (Lambda's advanced logging controls, which the CDK sets) wins, then
     * POWERTOOLS_LOG_LEVEL, then LOG_LEVEL; INFO when none is set. They are parsed here
     * only so that a typo fails the cold start naming the variable: the Logger would
     * quietly log at INFO.
     */
    POWERTOOLS_LOG_LEVEL: logLevel.optional(),
    LOG_LEVEL: logLevel.optional(),
  })
  .superRefine(refineDatabaseEnv);

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
