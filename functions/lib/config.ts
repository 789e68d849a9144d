/**
 * Configuration, parsed once from the environment at cold start.
 *
 * This module and `cdk/app.ts` are the only places that read the environment. Every
 * setting has a named default; a missing or malformed variable fails at start with the
 * variable's name in the message, never later in the middle of a batch.
 */
import { z } from 'zod';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export type Env = Record<string, string | undefined>;

const integer = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const boolean = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no']))
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const postgresUrl = z
  .string()
  .trim()
  .refine((v) => /^postgres(ql)?:\/\//.test(v) && URL.canParse(v), 'must be a postgres:// URL');

export const DEFAULTS = {
  dbPoolMax: 4,
  dbIdleTimeoutSeconds: 20,
  dbConnectTimeoutSeconds: 5,
  dbStatementTimeoutMs: 30_000,
  dbIdleInTransactionTimeoutMs: 60_000,
  maxPayloadBytes: 256 * 1024,
  /** Deepest nesting of objects and arrays a record's value may have (docs/ingest.md, step 3). */
  maxJsonDepth: 64,
  /** One schema-registry request, at most; past it the lookup counts as the registry being unavailable. */
  schemaRegistryTimeoutMs: 3_000,
  workerBatchSize: 100,
  workerRunLength: 20,
  workerSafetyMarginMs: 10_000,
  /** An awake worker keeps looking for new rows this long after the last it found (docs/worker.md, "Wake-ups"). */
  workerIdleMs: 10_000,
  /** …looking again this often while there are none. */
  workerPollMs: 250,
  /** Workers of one consumer awake at once, at most (its slots). */
  workerMaxConcurrency: 4,
  /** A worker wakes more when the due backlog would take it alone longer than this to drain. */
  workerFanOutDrainSeconds: 5,
  leaseSeconds: 300,
  reaperBatchSize: 1_000,
  reaperSafetyMarginMs: 10_000,
  relayBatchSize: 200,
  relayRunLength: 50,
  relaySafetyMarginMs: 10_000,
  relayPurgeBatchSize: 1_000,
  /** Delay before the next try after the broker refused an aggregate's head, by attempt; the last repeats. */
  relayBackoffSeconds: [1, 5, 15, 60, 300] as readonly number[],
  kafkaClientId: 'kafka-inbox-relay',
  kafkaConnectionTimeoutMs: 3_000,
  // One send, retries included, stays well inside the relay's deployed safety margin (30 s).
  kafkaRequestTimeoutMs: 5_000,
  kafkaRetries: 2,
  metricsNamespace: 'KafkaInbox',
  serviceName: 'kafka-inbox',
} as const;

/** A JSON object of consumer name to a value of `value`'s shape. */
function jsonRecord<T extends z.ZodType>(value: T, message: string) {
  return z
    .string()
    .trim()
    .transform((v, ctx) => {
      try {
        return z.record(z.string(), value).parse(JSON.parse(v));
      } catch {
        ctx.addIssue({ code: 'custom', message });
        return z.NEVER;
      }
    });
}

/** The levels Powertools Logger accepts, in any case. */
const logLevel = z
  .string()
  .trim()
  .toUpperCase()
  .pipe(z.enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'CRITICAL', 'SILENT']));

/**
 * The variables, each with its default. Unset and empty values take the default;
 * a set value that does not parse is an error naming the variable.
 */
const schema = z
  .object({
    /** A full connection string (local runs, tests). One of DATABASE_URL, DB_SECRET_ARN, DB_IAM_USER. */
    DATABASE_URL: postgresUrl.optional(),
    /**
     * The cluster's master secret (its JSON carries host, port, username, password, dbname):
     * the migration function's, and only its, in AWS.
     */
    DB_SECRET_ARN: z.string().trim().startsWith('arn:', 'must be a secret ARN').optional(),
    /**
     * The database role to connect as with IAM database authentication (the runtime
     * functions in AWS): every new connection signs a fresh token; no password exists.
     * Needs DB_HOST, DB_NAME and AWS_REGION.
     */
    DB_IAM_USER: z
      .string()
      .trim()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a database role name')
      .optional(),
    /** The database host for DB_IAM_USER (cluster or RDS Proxy endpoint); overrides the secret's host. */
    DB_HOST: z.string().trim().min(1).optional(),
    DB_PORT: integer(1, 65_535).optional(),
    /** The database name for DB_IAM_USER. */
    DB_NAME: z.string().trim().min(1).optional(),
    /** Set by Lambda: the region IAM database tokens and MSK IAM tokens are signed for. */
    AWS_REGION: z
      .string()
      .trim()
      .regex(/^[a-z]{2}(-gov)?-[a-z]+-\d$/, 'must be a region such as eu-west-1')
      .optional(),
    /** 'require' outside localhost by default; 'disable' for local servers; IAM authentication: 'verify-full', always. */
    DB_SSL: z.enum(['disable', 'require', 'verify-full']).optional(),
    /** false behind RDS Proxy or PgBouncer: named prepared statements pin a proxied session. */
    DB_PREPARE: boolean.default(true),
    DB_POOL_MAX: integer(1, 100).default(DEFAULTS.dbPoolMax),
    DB_IDLE_TIMEOUT_SECONDS: integer(1, 3600).default(DEFAULTS.dbIdleTimeoutSeconds),
    DB_CONNECT_TIMEOUT_SECONDS: integer(1, 60).default(DEFAULTS.dbConnectTimeoutSeconds),
    DB_STATEMENT_TIMEOUT_MS: integer(0, 15 * 60 * 1000).default(DEFAULTS.dbStatementTimeoutMs),
    /**
     * A Lambda killed or frozen inside a transaction leaves its session idle in transaction,
     * holding row locks; the server ends such a session after this long (0: never).
     */
    DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: integer(0, 60 * 60 * 1000).default(DEFAULTS.dbIdleInTransactionTimeoutMs),

    /** Which consumer declaration this function serves (ingest and worker). */
    CONSUMER_NAME: z.string().trim().min(1).optional(),

    MAX_PAYLOAD_BYTES: integer(1, 64 * 1024 * 1024).default(DEFAULTS.maxPayloadBytes),
    MAX_JSON_DEPTH: integer(2, 10_000).default(DEFAULTS.maxJsonDepth),
    /**
     * The ingest function's: its consumer's schema registry as the stage resolved it (the
     * declaration's `schemaRegistry`, JSON), where it reads writer schemas. Names and ARNs
     * only; the credentials stay in the secret it names.
     */
    SCHEMA_REGISTRY: z
      .string()
      .trim()
      .transform((v, ctx) => {
        try {
          return z.record(z.string(), z.unknown()).parse(JSON.parse(v));
        } catch {
          ctx.addIssue({ code: 'custom', message: 'must be a JSON object (a schemaRegistry declaration)' });
          return z.NEVER;
        }
      })
      .optional(),
    SCHEMA_REGISTRY_TIMEOUT_MS: integer(100, 60_000).default(DEFAULTS.schemaRegistryTimeoutMs),
    WORKER_BATCH_SIZE: integer(1, 10_000).default(DEFAULTS.workerBatchSize),
    /** Rows of one aggregate a claim may take in order (its run); 1 takes one row per aggregate. */
    WORKER_RUN_LENGTH: integer(1, 10_000).default(DEFAULTS.workerRunLength),
    WORKER_SAFETY_MARGIN_MS: integer(0, 15 * 60 * 1000).default(DEFAULTS.workerSafetyMarginMs),
    /** 0: stop at the first claim that finds nothing (the behaviour before wake-ups). */
    WORKER_IDLE_MS: integer(0, 15 * 60 * 1000).default(DEFAULTS.workerIdleMs),
    WORKER_POLL_MS: integer(10, 60 * 1000).default(DEFAULTS.workerPollMs),
    WORKER_MAX_CONCURRENCY: integer(1, 1000).default(DEFAULTS.workerMaxConcurrency),
    WORKER_FAN_OUT_DRAIN_SECONDS: integer(1, 15 * 60).default(DEFAULTS.workerFanOutDrainSeconds),
    /**
     * false: ingest wakes no worker and workers invoke none (no fan-out, no hand-over); the
     * schedule alone starts them.
     */
    WAKE_UPS: boolean.default(true),
    /** The ingest function's: its consumer's worker function, which it wakes (name or ARN). */
    WORKER_FUNCTION_NAME: z.string().trim().min(1).optional(),
    /** Set by Lambda: this function's own name (a worker invokes itself to fan out and hand over). */
    AWS_LAMBDA_FUNCTION_NAME: z.string().trim().min(1).optional(),
    LEASE_SECONDS: integer(1, 24 * 3600).default(DEFAULTS.leaseSeconds),
    REAPER_BATCH_SIZE: integer(1, 100_000).default(DEFAULTS.reaperBatchSize),
    /** The reaper stops starting batches this long before its invocation's deadline. */
    REAPER_SAFETY_MARGIN_MS: integer(0, 15 * 60 * 1000).default(DEFAULTS.reaperSafetyMarginMs),

    /** Outbox rows per relay claim, and of one aggregate per claim (its run, published in order). */
    RELAY_BATCH_SIZE: integer(1, 10_000).default(DEFAULTS.relayBatchSize),
    RELAY_RUN_LENGTH: integer(1, 10_000).default(DEFAULTS.relayRunLength),
    /** The relay stops claiming (and publishing) this long before its invocation's deadline. */
    RELAY_SAFETY_MARGIN_MS: integer(0, 15 * 60 * 1000).default(DEFAULTS.relaySafetyMarginMs),
    /** Published outbox rows deleted per retention statement. */
    RELAY_PURGE_BATCH_SIZE: integer(1, 100_000).default(DEFAULTS.relayPurgeBatchSize),
    /** The brokers the relay publishes to: host:port,host:port (MSK's IAM bootstrap string, port 9098). */
    KAFKA_BROKERS: z
      .string()
      .trim()
      .transform((v) =>
        v
          .split(',')
          .map((b) => b.trim())
          .filter((b) => b.length > 0),
      )
      .pipe(z.array(z.string().regex(/^[A-Za-z0-9.-]+:\d{1,5}$/, 'must be host:port')).min(1))
      .optional(),
    KAFKA_CLIENT_ID: z.string().trim().min(1).max(255).default(DEFAULTS.kafkaClientId),
    KAFKA_CONNECTION_TIMEOUT_MS: integer(100, 60_000).default(DEFAULTS.kafkaConnectionTimeoutMs),
    KAFKA_REQUEST_TIMEOUT_MS: integer(100, 120_000).default(DEFAULTS.kafkaRequestTimeoutMs),
    /** kafkajs retries of one send (the idempotent producer needs at least 1). */
    KAFKA_RETRIES: integer(1, 100).default(DEFAULTS.kafkaRetries),

    /** Worker schedule names per consumer for the ops pause/resume commands: JSON {consumer: name}. */
    SCHEDULE_GROUP_NAME: z.string().trim().min(1).optional(),
    WORKER_SCHEDULES: jsonRecord(z.string(), 'must be a JSON object of consumer name to schedule name').optional(),
    /** Each consumer's ingest event-source mappings for ops pause/resume --ingest: JSON {consumer: [uuid, …]}. */
    INGEST_MAPPINGS: jsonRecord(
      z.array(z.string().min(1)),
      'must be a JSON object of consumer name to a list of event-source mapping UUIDs',
    ).optional(),
    /** Each consumer's worker function, which ops resume wakes: JSON {consumer: function name}. */
    WORKER_FUNCTIONS: jsonRecord(z.string().min(1), 'must be a JSON object of consumer name to worker function name').optional(),
    /**
     * The SSM path of the consumer directory (ops pause/resume in AWS): one parameter per
     * consumer, written by its stack, naming its worker schedule and function and its ingest
     * mappings (functions/ops/consumer-directory.ts). The explicit maps above win over it.
     */
    CONSUMER_DIRECTORY: z
      .string()
      .trim()
      .regex(/^\/[A-Za-z0-9_.\-/]+\/$/, 'must be an SSM path that starts and ends with /')
      .optional(),
    /** The ops function's ARN: the target of one-time replay schedules (ops schedule-replay). */
    OPS_FUNCTION_ARN: z.string().trim().startsWith('arn:', 'must be a Lambda function ARN').optional(),
    /** The role EventBridge Scheduler assumes to invoke the ops function (ops schedule-replay). */
    SCHEDULER_ROLE_ARN: z.string().trim().startsWith('arn:', 'must be an IAM role ARN').optional(),

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
  .superRefine((env, ctx) => {
    const sources = (['DATABASE_URL', 'DB_SECRET_ARN', 'DB_IAM_USER'] as const).filter((k) => env[k] !== undefined);
    if (sources.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['DATABASE_URL'],
        message: 'set DATABASE_URL (local), DB_IAM_USER (AWS) or DB_SECRET_ARN (AWS, migrations)',
      });
    }
    if (sources.length > 1) {
      ctx.addIssue({
        code: 'custom',
        path: [sources[1]!],
        message: `set one of DATABASE_URL, DB_SECRET_ARN and DB_IAM_USER, not ${sources.join(' and ')}`,
      });
    }
    if (env.DB_IAM_USER !== undefined) {
      for (const k of ['DB_HOST', 'DB_NAME', 'AWS_REGION'] as const) {
        if (env[k] === undefined) ctx.addIssue({ code: 'custom', path: [k], message: 'required with DB_IAM_USER' });
      }
      // The token is a password good for 15 minutes: it goes only to a server whose certificate and name check out.
      if (env.DB_SSL !== undefined && env.DB_SSL !== 'verify-full') {
        ctx.addIssue({ code: 'custom', path: ['DB_SSL'], message: 'must be verify-full with DB_IAM_USER (an IAM token is a credential)' });
      }
    }
  });

export interface DatabaseConfig {
  url?: string;
  secretArn?: string;
  /** IAM database authentication as this role (with hostOverride, port, name and region). */
  iam?: { user: string; region: string };
  hostOverride?: string;
  port?: number;
  name?: string;
  ssl?: 'disable' | 'require' | 'verify-full';
  prepare: boolean;
  poolMax: number;
  idleTimeoutSeconds: number;
  connectTimeoutSeconds: number;
  statementTimeoutMs: number;
  idleInTransactionTimeoutMs: number;
}

export interface Config {
  database: DatabaseConfig;
  consumerName?: string;
  maxPayloadBytes: number;
  /** DEFAULTS.maxJsonDepth when omitted. */
  maxJsonDepth?: number;
  /** The ingest function's schema registry, unvalidated here (functions/framework/schema-registry.ts parses it). */
  schemaRegistry?: { declaration: Record<string, unknown>; timeoutMs: number };
  worker: {
    batchSize: number;
    safetyMarginMs: number;
    leaseSeconds: number;
    /** Rows of one aggregate per claim; DEFAULTS.workerRunLength when omitted. */
    runLength?: number;
    /** How long an awake worker keeps looking for new rows after the last it found; 0 when omitted. */
    idleMs?: number;
    pollMs?: number;
    /** The consumer's slots; DEFAULTS.workerMaxConcurrency when omitted. */
    maxConcurrency?: number;
    fanOutDrainSeconds?: number;
  };
  /** Who wakes whom (docs/worker.md, "Wake-ups"). */
  wakeUps: {
    enabled: boolean;
    /** The worker an ingest function wakes. */
    workerFunctionName?: string;
    /** This function (Lambda's AWS_LAMBDA_FUNCTION_NAME): the target of a worker's fan-out and hand-over. */
    functionName?: string;
  };
  reaper: { batchSize: number; safetyMarginMs: number };
  /** Each consumer's ingest event-source mapping UUIDs (ops pause/resume --ingest). */
  ingestMappings: Record<string, string[]>;
  /** Each consumer's worker function (ops resume wakes it). */
  workerFunctions: Record<string, string>;
  /** The SSM path of the consumer directory, where ops finds a consumer's schedule, worker and mappings in AWS. */
  consumerDirectory?: string;
  relay: {
    batchSize: number;
    runLength: number;
    safetyMarginMs: number;
    /** The relay's lane lease; capped at the invocation's remaining time. */
    leaseSeconds: number;
    purgeBatchSize: number;
    backoffSeconds: readonly number[];
  };
  /** The relay's producer. brokers and region are required by the relay function only. */
  kafka: {
    brokers?: string[];
    region?: string;
    clientId: string;
    connectionTimeoutMs: number;
    requestTimeoutMs: number;
    retries: number;
  };
  scheduler: {
    groupName?: string;
    workerSchedules: Record<string, string>;
    opsFunctionArn?: string;
    schedulerRoleArn?: string;
  };
  observability: { metricsNamespace: string; serviceName: string };
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
    database: {
      ...(e.DATABASE_URL !== undefined ? { url: e.DATABASE_URL } : {}),
      ...(e.DB_SECRET_ARN !== undefined ? { secretArn: e.DB_SECRET_ARN } : {}),
      ...(e.DB_IAM_USER !== undefined ? { iam: { user: e.DB_IAM_USER, region: e.AWS_REGION! } } : {}),
      ...(e.DB_HOST !== undefined ? { hostOverride: e.DB_HOST } : {}),
      ...(e.DB_PORT !== undefined ? { port: e.DB_PORT } : {}),
      ...(e.DB_NAME !== undefined ? { name: e.DB_NAME } : {}),
      ...(e.DB_SSL !== undefined ? { ssl: e.DB_SSL } : {}),
      prepare: e.DB_PREPARE,
      poolMax: e.DB_POOL_MAX,
      idleTimeoutSeconds: e.DB_IDLE_TIMEOUT_SECONDS,
      connectTimeoutSeconds: e.DB_CONNECT_TIMEOUT_SECONDS,
      statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS,
      idleInTransactionTimeoutMs: e.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    ...(e.CONSUMER_NAME !== undefined ? { consumerName: e.CONSUMER_NAME } : {}),
    maxPayloadBytes: e.MAX_PAYLOAD_BYTES,
    maxJsonDepth: e.MAX_JSON_DEPTH,
    ...(e.SCHEMA_REGISTRY !== undefined
      ? { schemaRegistry: { declaration: e.SCHEMA_REGISTRY, timeoutMs: e.SCHEMA_REGISTRY_TIMEOUT_MS } }
      : {}),
    worker: {
      batchSize: e.WORKER_BATCH_SIZE,
      safetyMarginMs: e.WORKER_SAFETY_MARGIN_MS,
      leaseSeconds: e.LEASE_SECONDS,
      runLength: e.WORKER_RUN_LENGTH,
      idleMs: e.WORKER_IDLE_MS,
      pollMs: e.WORKER_POLL_MS,
      maxConcurrency: e.WORKER_MAX_CONCURRENCY,
      fanOutDrainSeconds: e.WORKER_FAN_OUT_DRAIN_SECONDS,
    },
    wakeUps: {
      enabled: e.WAKE_UPS,
      ...(e.WORKER_FUNCTION_NAME !== undefined ? { workerFunctionName: e.WORKER_FUNCTION_NAME } : {}),
      ...(e.AWS_LAMBDA_FUNCTION_NAME !== undefined ? { functionName: e.AWS_LAMBDA_FUNCTION_NAME } : {}),
    },
    reaper: { batchSize: e.REAPER_BATCH_SIZE, safetyMarginMs: e.REAPER_SAFETY_MARGIN_MS },
    ingestMappings: e.INGEST_MAPPINGS ?? {},
    workerFunctions: e.WORKER_FUNCTIONS ?? {},
    ...(e.CONSUMER_DIRECTORY !== undefined ? { consumerDirectory: e.CONSUMER_DIRECTORY } : {}),
    relay: {
      batchSize: e.RELAY_BATCH_SIZE,
      runLength: e.RELAY_RUN_LENGTH,
      safetyMarginMs: e.RELAY_SAFETY_MARGIN_MS,
      leaseSeconds: e.LEASE_SECONDS,
      purgeBatchSize: e.RELAY_PURGE_BATCH_SIZE,
      backoffSeconds: DEFAULTS.relayBackoffSeconds,
    },
    kafka: {
      ...(e.KAFKA_BROKERS !== undefined ? { brokers: e.KAFKA_BROKERS } : {}),
      ...(e.AWS_REGION !== undefined ? { region: e.AWS_REGION } : {}),
      clientId: e.KAFKA_CLIENT_ID,
      connectionTimeoutMs: e.KAFKA_CONNECTION_TIMEOUT_MS,
      requestTimeoutMs: e.KAFKA_REQUEST_TIMEOUT_MS,
      retries: e.KAFKA_RETRIES,
    },
    scheduler: {
      ...(e.SCHEDULE_GROUP_NAME !== undefined ? { groupName: e.SCHEDULE_GROUP_NAME } : {}),
      workerSchedules: e.WORKER_SCHEDULES ?? {},
      ...(e.OPS_FUNCTION_ARN !== undefined ? { opsFunctionArn: e.OPS_FUNCTION_ARN } : {}),
      ...(e.SCHEDULER_ROLE_ARN !== undefined ? { schedulerRoleArn: e.SCHEDULER_ROLE_ARN } : {}),
    },
    observability: { metricsNamespace: e.METRICS_NAMESPACE, serviceName: e.SERVICE_NAME },
  };
}

/** A configuration that must name a consumer (ingest and worker functions). */
export function requireConsumerName(config: Config): string {
  if (config.consumerName === undefined) {
    throw new ConfigError('Invalid configuration: CONSUMER_NAME: required for this function');
  }
  return config.consumerName;
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
