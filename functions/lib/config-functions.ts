/**
 * The settings of the consumer's own functions, by kind: the ingest function's (payload
 * limits, its schema registry), the worker's (claims, wake-ups) and the reaper's.
 */
import { z } from 'zod';
import { DEFAULTS } from './config-defaults';
import { boolean, integer } from './env-values';

export const ingestEnv = {
  MAX_PAYLOAD_BYTES: integer(1, 64 * 1024 * 1024)
    .default(DEFAULTS.maxPayloadBytes)
    .describe('Larger records go to poison (PAYLOAD_TOO_LARGE, keeping a 4 KiB prefix, the size and the SHA-256).'),
  MAX_JSON_DEPTH: integer(2, 10_000).default(DEFAULTS.maxJsonDepth).describe('Values nested deeper go to poison (JSON_TOO_DEEP).'),
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
    .optional()
    .meta({ accepts: 'JSON object' })
    .describe(
      "The ingest function's: its consumer's schemaRegistry as the stage resolved it, where it reads writer schemas (set by the CDK app). Names and ARNs only; the credentials stay in the secret it names.",
    ),
  SCHEMA_REGISTRY_TIMEOUT_MS: integer(100, 60_000)
    .default(DEFAULTS.schemaRegistryTimeoutMs)
    .describe('One writer-schema lookup, at most; longer counts as the registry being unavailable.'),
  SCHEMA_REGISTRY_SECRET_MAX_AGE_SECONDS: integer(1, 24 * 3600)
    .default(DEFAULTS.schemaRegistrySecretMaxAgeSeconds)
    .describe(
      "A Confluent registry's credentials are read from their secret again after this long (and at once when the registry refuses them).",
    ),
};

export const workerEnv = {
  WORKER_BATCH_SIZE: integer(1, 10_000).default(DEFAULTS.workerBatchSize).describe('Rows per claim.'),
  WORKER_RUN_LENGTH: integer(1, 10_000)
    .default(DEFAULTS.workerRunLength)
    .describe(
      'Consecutive due rows of one aggregate a claim may take (its run), applied in order in one batch; 1 takes one row per aggregate.',
    ),
  WORKER_SAFETY_MARGIN_MS: integer(0, 15 * 60 * 1000)
    .default(DEFAULTS.workerSafetyMarginMs)
    .describe('The worker stops claiming when less time than this remains in its invocation.'),
  WORKER_IDLE_MS: integer(0, 15 * 60 * 1000)
    .default(DEFAULTS.workerIdleMs)
    .describe('An awake worker keeps claiming this long after the last rows it found (0: it stops at the first claim that finds nothing).'),
  WORKER_POLL_MS: integer(10, 60 * 1000)
    .default(DEFAULTS.workerPollMs)
    .describe("An awake worker's pause between claims that find nothing."),
  WORKER_MAX_CONCURRENCY: integer(1, 1000)
    .default(DEFAULTS.workerMaxConcurrency)
    .describe("The consumer's worker slots: workers awake at once, at most."),
  WORKER_FAN_OUT_DRAIN_SECONDS: integer(1, 15 * 60)
    .default(DEFAULTS.workerFanOutDrainSeconds)
    .describe('A worker fans out when the due lanes would take it alone longer than this to drain.'),
  WAKE_UPS: boolean
    .default(true)
    .describe('false: ingest wakes no worker and workers invoke none (no fan-out, no hand-over); the schedule alone starts them.'),
  WORKER_FUNCTION_NAME: z
    .string()
    .trim()
    .min(1)
    .optional()
    .describe("The ingest function's: its consumer's worker function (name or ARN), which it wakes (set by the CDK app)."),
  AWS_LAMBDA_FUNCTION_NAME: z
    .string()
    .trim()
    .min(1)
    .optional()
    .describe("Set by Lambda: this function's own name, the target of a worker's fan-out and hand-over."),
  LEASE_SECONDS: integer(1, 24 * 3600)
    .default(DEFAULTS.leaseSeconds)
    .describe("A claim's lease (the worker's rows, the relay's lanes), never beyond the invocation's deadline."),
};

export const reaperEnv = {
  REAPER_BATCH_SIZE: integer(1, 100_000).default(DEFAULTS.reaperBatchSize).describe('Rows per reaper statement.'),
  REAPER_SAFETY_MARGIN_MS: integer(0, 15 * 60 * 1000)
    .default(DEFAULTS.reaperSafetyMarginMs)
    .describe("The reaper stops starting batches this long before its invocation's deadline."),
  REAPER_SESSION_BOUND_SECONDS: integer(1, 24 * 3600)
    .default(DEFAULTS.consumerSessionBoundSeconds)
    .describe(
      'A consumer role\'s session whose transaction is older than this is ended by the reaper (docs/reaper.md, "Sessions past the bound").',
    ),
};

type IngestEnv = z.infer<z.ZodObject<typeof ingestEnv>>;
type WorkerEnv = z.infer<z.ZodObject<typeof workerEnv>>;
type ReaperEnv = z.infer<z.ZodObject<typeof reaperEnv>>;

export interface IngestConfig {
  maxPayloadBytes: number;
  /** DEFAULTS.maxJsonDepth when omitted. */
  maxJsonDepth?: number;
  /** The ingest function's schema registry, unvalidated here (functions/framework/schema-registry.ts parses it). */
  schemaRegistry?: { declaration: Record<string, unknown>; timeoutMs: number; secretMaxAgeSeconds: number };
}

export interface WorkerConfig {
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
}

/** Who wakes whom (docs/worker.md, "Wake-ups"). */
export interface WakeUpsConfig {
  enabled: boolean;
  /** The worker an ingest function wakes. */
  workerFunctionName?: string;
  /** This function (Lambda's AWS_LAMBDA_FUNCTION_NAME): the target of a worker's fan-out and hand-over. */
  functionName?: string;
}

export interface ReaperConfig {
  batchSize: number;
  safetyMarginMs: number;
  /** Consumer roles' transactions older than this are ended; DEFAULTS.consumerSessionBoundSeconds when omitted. */
  sessionBoundSeconds?: number;
}

export function ingestConfig(e: IngestEnv): IngestConfig {
  return {
    maxPayloadBytes: e.MAX_PAYLOAD_BYTES,
    maxJsonDepth: e.MAX_JSON_DEPTH,
    ...(e.SCHEMA_REGISTRY !== undefined
      ? {
          schemaRegistry: {
            declaration: e.SCHEMA_REGISTRY,
            timeoutMs: e.SCHEMA_REGISTRY_TIMEOUT_MS,
            secretMaxAgeSeconds: e.SCHEMA_REGISTRY_SECRET_MAX_AGE_SECONDS,
          },
        }
      : {}),
  };
}

export function workerConfig(e: WorkerEnv): WorkerConfig {
  return {
    batchSize: e.WORKER_BATCH_SIZE,
    safetyMarginMs: e.WORKER_SAFETY_MARGIN_MS,
    leaseSeconds: e.LEASE_SECONDS,
    runLength: e.WORKER_RUN_LENGTH,
    idleMs: e.WORKER_IDLE_MS,
    pollMs: e.WORKER_POLL_MS,
    maxConcurrency: e.WORKER_MAX_CONCURRENCY,
    fanOutDrainSeconds: e.WORKER_FAN_OUT_DRAIN_SECONDS,
  };
}

export function wakeUpsConfig(e: WorkerEnv): WakeUpsConfig {
  return {
    enabled: e.WAKE_UPS,
    ...(e.WORKER_FUNCTION_NAME !== undefined ? { workerFunctionName: e.WORKER_FUNCTION_NAME } : {}),
    ...(e.AWS_LAMBDA_FUNCTION_NAME !== undefined ? { functionName: e.AWS_LAMBDA_FUNCTION_NAME } : {}),
  };
}

export function reaperConfig(e: ReaperEnv): ReaperConfig {
  return { batchSize: e.REAPER_BATCH_SIZE, safetyMarginMs: e.REAPER_SAFETY_MARGIN_MS, sessionBoundSeconds: e.REAPER_SESSION_BOUND_SECONDS };
}
