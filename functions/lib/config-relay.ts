/**
 * The relay function's settings: its claims of the outbox, and the Kafka producer it
 * publishes with.
 */
import { z } from 'zod';
import { DEFAULTS } from './config-defaults';
import { integer } from './env-values';

export const relayEnv = {
  RELAY_BATCH_SIZE: integer(1, 10_000).default(DEFAULTS.relayBatchSize).describe('Outbox rows per relay claim.'),
  RELAY_RUN_LENGTH: integer(1, 10_000)
    .default(DEFAULTS.relayRunLength)
    .describe('Outbox rows of one aggregate per claim (its run, published in order).'),
  RELAY_SAFETY_MARGIN_MS: integer(0, 15 * 60 * 1000)
    .default(DEFAULTS.relaySafetyMarginMs)
    .describe(
      'The relay starts no claim or send with less time left in its invocation: longer than one send can take (the CDK app sets 30 s).',
    ),
  RELAY_PURGE_BATCH_SIZE: integer(1, 100_000)
    .default(DEFAULTS.relayPurgeBatchSize)
    .describe('Published outbox rows deleted per retention statement.'),
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
    .optional()
    .meta({ accepts: 'host:port,host:port' })
    .describe("The relay's brokers (MSK's IAM bootstrap string, port 9098); set by the CDK app."),
  KAFKA_CLIENT_ID: z.string().trim().min(1).max(255).default(DEFAULTS.kafkaClientId).describe("The relay's producer's client id."),
  KAFKA_CONNECTION_TIMEOUT_MS: integer(100, 60_000)
    .default(DEFAULTS.kafkaConnectionTimeoutMs)
    .describe("The producer's connection timeout (docs/relay.md)."),
  KAFKA_REQUEST_TIMEOUT_MS: integer(100, 120_000)
    .default(DEFAULTS.kafkaRequestTimeoutMs)
    .describe("The producer's request timeout (docs/relay.md)."),
  KAFKA_RETRIES: integer(2, 100)
    .default(DEFAULTS.kafkaRetries)
    .describe(
      'Retries of each step of a send (connect, metadata, producer id, produce). At least 2: the Kafka client makes an idempotent producer\'s 0 or 1 mean "retry without end", and a send must end within the invocation.',
    ),
};

/** The relay's variables, with the two it shares: the lease (the worker's) and the region (the database's). */
type RelayEnv = z.infer<z.ZodObject<typeof relayEnv>> & { LEASE_SECONDS: number; AWS_REGION?: string | undefined };

export interface RelayConfig {
  batchSize: number;
  runLength: number;
  safetyMarginMs: number;
  /** The relay's lane lease; capped at the invocation's remaining time. */
  leaseSeconds: number;
  purgeBatchSize: number;
  backoffSeconds: readonly number[];
}

/** The relay's producer. brokers and region are required by the relay function only. */
export interface KafkaConfig {
  brokers?: string[];
  region?: string;
  clientId: string;
  connectionTimeoutMs: number;
  requestTimeoutMs: number;
  retries: number;
}

export function relayConfig(e: RelayEnv): RelayConfig {
  return {
    batchSize: e.RELAY_BATCH_SIZE,
    runLength: e.RELAY_RUN_LENGTH,
    safetyMarginMs: e.RELAY_SAFETY_MARGIN_MS,
    leaseSeconds: e.LEASE_SECONDS,
    purgeBatchSize: e.RELAY_PURGE_BATCH_SIZE,
    backoffSeconds: DEFAULTS.relayBackoffSeconds,
  };
}

export function kafkaConfig(e: RelayEnv): KafkaConfig {
  return {
    ...(e.KAFKA_BROKERS !== undefined ? { brokers: e.KAFKA_BROKERS } : {}),
    ...(e.AWS_REGION !== undefined ? { region: e.AWS_REGION } : {}),
    clientId: e.KAFKA_CLIENT_ID,
    connectionTimeoutMs: e.KAFKA_CONNECTION_TIMEOUT_MS,
    requestTimeoutMs: e.KAFKA_REQUEST_TIMEOUT_MS,
    retries: e.KAFKA_RETRIES,
  };
}
