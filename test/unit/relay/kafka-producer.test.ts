/**
 * The MSK producer's configuration, without a broker: kafkajs gets IAM (SASL/OAUTHBEARER
 * over TLS) with a token AWS's signer made, an idempotent producer with one request in
 * flight, no topic auto-creation, and every send asks for acks=all.
 */
import type { ProducerRecord } from 'kafkajs';
import { Kafka } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, parseConfig, requireKafka } from '../../../functions/lib/config';
import {
  ACKS_ALL,
  KafkaOutboxProducer,
  mskKafkaConfig,
  producerConfig,
  type KafkaProducerClient,
} from '../../../functions/relay/kafka-producer';

const ENV = {
  DATABASE_URL: 'postgres://u@localhost/db',
  KAFKA_BROKERS: 'b-1.msk.example:9098, b-2.msk.example:9098',
  AWS_REGION: 'eu-west-1',
};
const settings = requireKafka(parseConfig(ENV));
const log = { warn: () => {}, error: () => {} };
const staticCredentials = async () => ({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' });

describe('the MSK producer configuration', () => {
  it('connects to the configured brokers over TLS with the IAM mechanism and the relay’s client id', () => {
    const config = mskKafkaConfig(settings, log, staticCredentials);

    expect(config).toMatchObject({
      clientId: DEFAULTS.kafkaClientId,
      brokers: ['b-1.msk.example:9098', 'b-2.msk.example:9098'],
      ssl: true,
      sasl: { mechanism: 'oauthbearer' },
      connectionTimeout: DEFAULTS.kafkaConnectionTimeoutMs,
      requestTimeout: DEFAULTS.kafkaRequestTimeoutMs,
    });
  });

  it('the OAUTHBEARER token is AWS’s signed kafka-cluster:Connect request for the region, signed offline', async () => {
    const config = mskKafkaConfig(settings, log, staticCredentials);
    const sasl = config.sasl as { oauthBearerProvider: () => Promise<{ value: string }> };

    const { value } = await sasl.oauthBearerProvider();

    const url = new URL(Buffer.from(value, 'base64url').toString('utf8'));
    expect(url.host).toBe('kafka.eu-west-1.amazonaws.com');
    expect(url.searchParams.get('Action')).toBe('kafka-cluster:Connect');
    expect(url.searchParams.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/^AKIDEXAMPLE\/\d{8}\/eu-west-1\/kafka-cluster\/aws4_request$/);
    expect(url.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    expect(url.searchParams.get('User-Agent')).toMatch(/^aws-msk-iam-sasl-signer-js\//);
  });

  it('the producer is idempotent with one request in flight, bounded retries and no topic auto-creation', () => {
    expect(producerConfig(settings)).toEqual({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      retry: { retries: DEFAULTS.kafkaRetries, initialRetryTime: 200, maxRetryTime: 2_000 },
    });
  });

  it('kafkajs accepts the configuration as it stands (it refuses an idempotent producer without retries)', () => {
    const kafka = new Kafka(mskKafkaConfig(settings, log, staticCredentials));
    expect(() => kafka.producer(producerConfig(settings))).not.toThrow();
    expect(() => kafka.producer({ ...producerConfig(settings), retry: { retries: 0 } })).toThrow(/Idempotent producer must allow retries/);
  });

  it('the relay function needs brokers and a region: a cold start without them names both', () => {
    expect(() => requireKafka(parseConfig({ DATABASE_URL: ENV.DATABASE_URL }))).toThrow(
      'Invalid configuration: KAFKA_BROKERS: required for the relay; AWS_REGION: required for the relay',
    );
    expect(() => parseConfig({ ...ENV, KAFKA_BROKERS: 'no-port' })).toThrow(/KAFKA_BROKERS.*must be host:port/);
  });
});

describe('KafkaOutboxProducer', () => {
  function recordingClient(options: { failConnects?: number } = {}) {
    const sent: ProducerRecord[] = [];
    let connects = 0;
    let failures = options.failConnects ?? 0;
    const client: KafkaProducerClient = {
      async connect() {
        connects += 1;
        if (failures-- > 0) throw new Error('connect refused');
      },
      async send(record) {
        sent.push(record);
        return [];
      },
      async disconnect() {},
    };
    return { client, sent, connects: () => connects };
  }

  it('sends the messages to the topic in order with acks=all (-1), keys and headers as given', async () => {
    const { client, sent } = recordingClient();
    const producer = new KafkaOutboxProducer(client);

    await producer.publish('t.v1', [
      { key: 'case_1', value: '{"n":1}', headers: { eventId: 'e1', eventType: 'x' } },
      { key: 'case_1', value: '{"n":2}', headers: { eventId: 'e2', eventType: 'x' } },
    ]);

    expect(ACKS_ALL).toBe(-1);
    expect(sent).toEqual([
      {
        topic: 't.v1',
        acks: -1,
        messages: [
          { key: 'case_1', value: '{"n":1}', headers: { eventId: 'e1', eventType: 'x' } },
          { key: 'case_1', value: '{"n":2}', headers: { eventId: 'e2', eventType: 'x' } },
        ],
      },
    ]);
  });

  it('connects once for many sends; a failed connect fails that publish and is tried again by the next', async () => {
    const { client, sent, connects } = recordingClient({ failConnects: 1 });
    const producer = new KafkaOutboxProducer(client);
    const message = { key: 'k', value: 'v', headers: {} };

    await expect(producer.publish('t', [message])).rejects.toThrow('connect refused');
    await producer.publish('t', [message]);
    await producer.publish('t', [message]);

    expect(connects()).toBe(2);
    expect(sent).toHaveLength(2);
  });
});
