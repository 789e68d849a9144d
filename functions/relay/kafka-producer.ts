/**
 * The relay's producer in AWS: kafkajs to MSK with IAM authentication.
 *
 * - MSK IAM: SASL/OAUTHBEARER over TLS (port 9098), each token signed by AWS's published
 *   signer (aws-msk-iam-sasl-signer-js) from the function's role credentials; kafkajs asks
 *   for a new token whenever it authenticates a connection. The role needs
 *   kafka-cluster:Connect and WriteDataIdempotently on the cluster and WriteData on the
 *   topics it publishes to (cdk/constructs/outbox-relay.ts).
 * - Idempotent, acks=all: a batch retried by the producer itself (a lost ack, a leader
 *   change) is written once, and an acknowledged message is on every in-sync replica.
 *   One request in flight per broker keeps a partition's order through those retries.
 * - Bounded retries: the send must end within the invocation. The kafkajs warning that
 *   finite retries "may invalidate EoS guarantees" is about that producer session; a send
 *   that fails is published again later under the same event id, which downstream dedupes.
 * - No topic auto-creation: the topics are the declarations', created with the cluster.
 *
 * Like every function, the bundle leaves @aws-sdk/* to the Lambda runtime: the signer's
 * @aws-sdk/client-sts and @aws-sdk/credential-providers come from the runtime's SDK (its
 * @smithy signer and SHA-256 are bundled).
 */
import { Kafka, logLevel, type KafkaConfig, type LogEntry, type Producer, type ProducerConfig } from 'kafkajs';
import { generateAuthToken, generateAuthTokenFromCredentialsProvider } from 'aws-msk-iam-sasl-signer-js';
import type { Config } from '../lib/config';
import type { OutboxMessage, OutboxProducer } from './producer';

/** What the signer accepts as credentials (its own type, not a transitive package's). */
export type CredentialsProvider = Parameters<typeof generateAuthTokenFromCredentialsProvider>[0]['awsCredentialsProvider'];

/** acks=all: the leader waits for every in-sync replica. */
export const ACKS_ALL = -1;

export type KafkaSettings = Config['kafka'] & { brokers: string[]; region: string };

export interface KafkaLog {
  warn(message: string, extra: Record<string, unknown>): void;
  error(message: string, extra: Record<string, unknown>): void;
}

/**
 * Signs an MSK IAM token: from the default credential chain (in Lambda, the function's
 * role), or from the credentials given (tests sign offline with static ones).
 */
export function mskIamTokenProvider(region: string, credentials?: CredentialsProvider): () => Promise<{ value: string }> {
  return async () => {
    const { token } =
      credentials === undefined
        ? await generateAuthToken({ region })
        : await generateAuthTokenFromCredentialsProvider({ region, awsCredentialsProvider: credentials });
    return { value: token };
  };
}

/** kafkajs's log lines into ours, WARN and above; they carry brokers and error names, never messages' values. */
function logCreator(log: KafkaLog): KafkaConfig['logCreator'] {
  return () =>
    ({ namespace, level, log: entry }: LogEntry) => {
      const { message, ...extra } = entry;
      const line = { kafkaNamespace: namespace, ...pick(extra, ['broker', 'clientId', 'error', 'retryCount', 'retryTime']) };
      if (level === logLevel.ERROR) log.error(`kafkajs: ${message}`, line);
      else log.warn(`kafkajs: ${message}`, line);
    };
}

function pick(source: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => source[k] !== undefined).map((k) => [k, source[k]]));
}

export function mskKafkaConfig(settings: KafkaSettings, log: KafkaLog, credentials?: CredentialsProvider): KafkaConfig {
  return {
    clientId: settings.clientId,
    brokers: settings.brokers,
    ssl: true,
    sasl: { mechanism: 'oauthbearer', oauthBearerProvider: mskIamTokenProvider(settings.region, credentials) },
    connectionTimeout: settings.connectionTimeoutMs,
    requestTimeout: settings.requestTimeoutMs,
    retry: { retries: settings.retries, initialRetryTime: 200, maxRetryTime: 2_000 },
    logLevel: logLevel.WARN,
    logCreator: logCreator(log),
  };
}

export function producerConfig(settings: Pick<KafkaSettings, 'retries'>): ProducerConfig {
  return {
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    retry: { retries: settings.retries, initialRetryTime: 200, maxRetryTime: 2_000 },
  };
}

/** The part of a kafkajs Producer the relay uses. */
export type KafkaProducerClient = Pick<Producer, 'connect' | 'send' | 'disconnect'>;

export class KafkaOutboxProducer implements OutboxProducer {
  private connected: Promise<void> | undefined;

  constructor(private readonly producer: KafkaProducerClient) {}

  async publish(topic: string, messages: readonly OutboxMessage[]): Promise<void> {
    // Connected once per container; a failed connect is forgotten so the next publish retries.
    this.connected ??= this.producer.connect().catch((error: unknown) => {
      this.connected = undefined;
      throw error;
    });
    await this.connected;
    await this.producer.send({
      topic,
      acks: ACKS_ALL,
      messages: messages.map((m) => ({ key: m.key, value: m.value, headers: m.headers })),
    });
  }

  async close(): Promise<void> {
    this.connected = undefined;
    await this.producer.disconnect();
  }
}

export function createMskProducer(settings: KafkaSettings, log: KafkaLog, credentials?: CredentialsProvider): KafkaOutboxProducer {
  const kafka = new Kafka(mskKafkaConfig(settings, log, credentials));
  return new KafkaOutboxProducer(kafka.producer(producerConfig(settings)));
}
