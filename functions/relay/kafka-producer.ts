/**
 * The relay's producer in AWS: @platformatic/kafka to MSK with IAM authentication (why this
 * client: docs/relay.md, "The Kafka client").
 *
 * - MSK IAM: SASL/OAUTHBEARER over TLS (port 9098), each token signed by AWS's published
 *   signer (aws-msk-iam-sasl-signer-js) from the function's role credentials; the client
 *   asks for a new token whenever it authenticates a connection, and re-authenticates
 *   before the broker's session lifetime ends. The role needs kafka-cluster:Connect and
 *   WriteDataIdempotently on the cluster and WriteData on the topics it publishes to
 *   (cdk/constructs/outbox-relay.ts).
 * - Idempotent, acks=all: a batch retried by the producer itself (a lost ack, a leader
 *   change) is written once, and an acknowledged message is on every in-sync replica.
 *   One request in flight per broker keeps a partition's order through those retries.
 * - Bounded retries: the send must end within the invocation. The client turns an
 *   idempotent producer's retries of 0 or 1 into "retry forever", so the configuration
 *   allows 2 at least (functions/lib/config-relay.ts). A send that fails is published
 *   again later under the same event id, which downstream dedupes.
 * - Partitions as Java's producer (and kafkajs before) choose them: murmur2 of the key,
 *   made positive by masking its sign bit. The client's default partitioner makes it
 *   positive otherwise, which would move some aggregates to another partition.
 * - No topic auto-creation: the topics are the declarations', created with the cluster.
 *
 * Like every function, the bundle leaves @aws-sdk/* to the Lambda runtime: the signer's
 * @aws-sdk/client-sts and @aws-sdk/credential-providers come from the runtime's SDK (its
 * @smithy signer and SHA-256 are bundled).
 */
import {
  compatibilityPartitioner,
  ProduceAcks,
  Producer,
  stringSerializers,
  type ProducerOptions,
  type SendOptions,
} from '@platformatic/kafka';
import { generateAuthToken, generateAuthTokenFromCredentialsProvider } from 'aws-msk-iam-sasl-signer-js';
import type { Config } from '../lib/config';
import type { OutboxMessage, OutboxProducer } from './producer';

/** What the signer accepts as credentials (its own type, not a transitive package's). */
export type CredentialsProvider = Parameters<typeof generateAuthTokenFromCredentialsProvider>[0]['awsCredentialsProvider'];

export type KafkaSettings = Config['kafka'] & { brokers: string[]; region: string };

type StringProducerOptions = ProducerOptions<string, string, string, string>;

/**
 * Signs an MSK IAM token: from the default credential chain (in Lambda, the function's
 * role), or from the credentials given (tests sign offline with static ones).
 */
export function mskIamTokenProvider(region: string, credentials?: CredentialsProvider): () => Promise<string> {
  return async () => {
    const { token } =
      credentials === undefined
        ? await generateAuthToken({ region })
        : await generateAuthTokenFromCredentialsProvider({ region, awsCredentialsProvider: credentials });
    return token;
  };
}

/** Between a failed request and its retry: 200 ms, doubling, at most 2 s. */
export function retryDelayMs(attempt: number): number {
  return Math.min(200 * 2 ** Math.max(0, attempt - 1), 2_000);
}

export function mskProducerOptions(settings: KafkaSettings, credentials?: CredentialsProvider): StringProducerOptions {
  return {
    clientId: settings.clientId,
    bootstrapBrokers: settings.brokers,
    tls: {},
    tlsServerName: true,
    sasl: { mechanism: 'OAUTHBEARER', token: mskIamTokenProvider(settings.region, credentials) },
    connectTimeout: settings.connectionTimeoutMs,
    requestTimeout: settings.requestTimeoutMs,
    // How long the broker may wait for the in-sync replicas before it answers a produce request.
    timeout: settings.requestTimeoutMs,
    retries: settings.retries,
    retryDelay: (_client, _operation, attempt) => retryDelayMs(attempt),
    idempotent: true,
    acks: ProduceAcks.ALL,
    maxInflights: 1,
    autocreateTopics: false,
    partitioner: compatibilityPartitioner,
    serializers: stringSerializers,
    // The client checks every option and send against its schemas.
    strict: true,
  };
}

/** The part of the client's Producer the relay uses. */
export interface KafkaProducerClient {
  send(options: SendOptions<string, string, string, string>): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * A send the client gave up on, its message the chain down to the root cause (the last
 * attempt's, e.g. `initProducerId failed 3 times: Cannot connect to any broker: Connection
 * to b-1:9098 failed: connect ECONNREFUSED …`): the client's own top message names only the
 * step that failed. Messages name brokers, steps and Kafka error codes, never a record.
 */
export class KafkaSendError extends Error {
  readonly code: string | undefined;
  constructor(cause: unknown) {
    super(causeChain(cause), { cause });
    this.name = 'KafkaSendError';
    this.code = typeof (cause as { code?: unknown })?.code === 'string' ? (cause as { code: string }).code : undefined;
  }
}

function causeChain(error: unknown, depth = 0): string {
  if (!(error instanceof Error)) return String(error);
  const own = error.message.replace(/\.$/, '');
  if (depth >= 8) return own;
  const inner = error instanceof AggregateError && error.errors.length > 0 ? error.errors[error.errors.length - 1] : error.cause;
  return inner === undefined ? own : `${own}: ${causeChain(inner, depth + 1)}`;
}

/**
 * The relay's OutboxProducer on the client. Two rules keep the idempotent producer's
 * promise (one copy per acknowledged send) with this client:
 *
 * - One send at a time. The client numbers a partition's batch when it builds the
 *   request and counts it only when the answer comes: two sends in flight to one partition
 *   would carry the same sequence number, and the broker takes a batch whose numbers it
 *   has written for a duplicate, acknowledging it without writing it. The lanes of a claim
 *   publish side by side; their sends queue here.
 * - A fresh client after a failed send. Whether the broker wrote a send that failed is
 *   unknown (a timeout after the write), so the client's numbering may be behind the
 *   broker's; the next send must not reuse those numbers. A new client takes a new
 *   producer id, whose numbering starts afresh; the failed rows go out again later under
 *   their own event ids, which downstream dedupes.
 */
export class KafkaOutboxProducer implements OutboxProducer {
  private client: KafkaProducerClient | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly createClient: () => KafkaProducerClient) {}

  publish(topic: string, messages: readonly OutboxMessage[]): Promise<void> {
    const sent = this.queue.then(() => this.send(topic, messages));
    this.queue = sent.catch(() => {});
    return sent;
  }

  private async send(topic: string, messages: readonly OutboxMessage[]): Promise<void> {
    // The client connects, fetches metadata and takes its producer id on its first send.
    const client = (this.client ??= this.createClient());
    try {
      await client.send({
        acks: ProduceAcks.ALL,
        messages: messages.map((m) => ({ topic, key: m.key, value: m.value, headers: m.headers })),
      });
    } catch (error) {
      this.client = undefined;
      await client.close().catch(() => {});
      throw new KafkaSendError(error);
    }
  }

  /** Waits for the sends queued so far, then closes the client (tests; a Lambda container never closes it). */
  async close(): Promise<void> {
    await this.queue;
    const client = this.client;
    this.client = undefined;
    await client?.close();
  }
}

export function createMskProducer(settings: KafkaSettings, credentials?: CredentialsProvider): KafkaOutboxProducer {
  return new KafkaOutboxProducer(() => new Producer(mskProducerOptions(settings, credentials)));
}
