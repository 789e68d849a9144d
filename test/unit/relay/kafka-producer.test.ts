/**
 * The MSK producer without a broker: the client gets IAM (SASL/OAUTHBEARER over TLS) with
 * a token AWS's signer made, an idempotent producer with acks=all and one request in
 * flight, bounded retries, Java's partitioning and no topic auto-creation; the relay's
 * producer sends one batch at a time, starts a fresh idempotent session after a failed
 * send, and says why a send failed down to its root cause.
 */
import { murmur2, ProduceAcks, Producer, type SendOptions } from '@platformatic/kafka';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, parseConfig, requireKafka } from '../../../functions/lib/config';
import {
  KafkaOutboxProducer,
  KafkaSendError,
  mskProducerOptions,
  retryDelayMs,
  type KafkaProducerClient,
} from '../../../functions/relay/kafka-producer';

const ENV = {
  DATABASE_URL: 'postgres://u@localhost/db',
  KAFKA_BROKERS: 'b-1.msk.example:9098, b-2.msk.example:9098',
  AWS_REGION: 'eu-west-1',
};
const settings = requireKafka(parseConfig(ENV));
const staticCredentials = async () => ({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' });

describe('the MSK producer options', () => {
  it('connects to the configured brokers over TLS with the IAM mechanism, the relay’s client id and timeouts', () => {
    const options = mskProducerOptions(settings, staticCredentials);

    expect(options).toMatchObject({
      clientId: DEFAULTS.kafkaClientId,
      bootstrapBrokers: ['b-1.msk.example:9098', 'b-2.msk.example:9098'],
      tls: {},
      tlsServerName: true,
      sasl: { mechanism: 'OAUTHBEARER' },
      connectTimeout: DEFAULTS.kafkaConnectionTimeoutMs,
      requestTimeout: DEFAULTS.kafkaRequestTimeoutMs,
      timeout: DEFAULTS.kafkaRequestTimeoutMs,
    });
  });

  it('the OAUTHBEARER token is AWS’s signed kafka-cluster:Connect request for the region, signed offline', async () => {
    const { sasl } = mskProducerOptions(settings, staticCredentials);
    const token = sasl!.token as () => Promise<string>;

    const url = new URL(Buffer.from(await token(), 'base64url').toString('utf8'));

    expect(url.host).toBe('kafka.eu-west-1.amazonaws.com');
    expect(url.searchParams.get('Action')).toBe('kafka-cluster:Connect');
    expect(url.searchParams.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/^AKIDEXAMPLE\/\d{8}\/eu-west-1\/kafka-cluster\/aws4_request$/);
    expect(url.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    expect(url.searchParams.get('User-Agent')).toMatch(/^aws-msk-iam-sasl-signer-js\//);
  });

  it('is idempotent with acks=all, one request in flight, the configured retries and no topic auto-creation', () => {
    expect(mskProducerOptions(settings)).toMatchObject({
      idempotent: true,
      acks: -1,
      maxInflights: 1,
      retries: DEFAULTS.kafkaRetries,
      autocreateTopics: false,
      strict: true,
    });
    expect(ProduceAcks.ALL).toBe(-1);
    expect([1, 2, 3, 4, 5, 9].map(retryDelayMs)).toEqual([200, 400, 800, 1_600, 2_000, 2_000]);
  });

  it('the client accepts the options under its own schema checks; it refuses what it cannot honour', async () => {
    const producer = new Producer(mskProducerOptions(settings, staticCredentials));
    try {
      expect(producer.closed).toBe(false);
      // An idempotent producer acknowledges with every in-sync replica or not at all.
      await expect(producer.send({ acks: ProduceAcks.LEADER, messages: [{ topic: 't', key: 'k', value: 'v' }] })).rejects.toThrow(
        'Idempotent producer requires acks to be ALL (-1).',
      );
    } finally {
      await producer.close();
    }
  });

  it('KAFKA_RETRIES below 2 fails the cold start: the client would retry an idempotent send without end', () => {
    expect(() => parseConfig({ ...ENV, KAFKA_RETRIES: '1' })).toThrow(/KAFKA_RETRIES/);
    expect(requireKafka(parseConfig({ ...ENV, KAFKA_RETRIES: '2' })).retries).toBe(2);
  });

  it('an aggregate’s partition is the one Java’s producer (and kafkajs) chose: murmur2 with the sign bit masked', () => {
    // Kafka's own murmur2 test vectors (UtilsTest.testMurmur2), as Java computes them.
    const java: Record<string, number> = {
      '21': -973932308,
      foobar: -790332482,
      'a-little-bit-long-string': -985981536,
      'a-little-bit-longer-string': -1486304829,
      lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8: -58897971,
      abc: 479470107,
    };
    const { partitioner } = mskProducerOptions(settings);
    for (const [key, hash] of Object.entries(java)) {
      expect(murmur2(Buffer.from(key))).toBe(hash);
      // The client takes the partitioner's number modulo the topic's partition count.
      for (const partitions of [3, 6, 12]) {
        expect(partitioner!({ topic: 't', key }, Buffer.from(key), { metadata: undefined }) % partitions).toBe(
          (hash & 0x7fffffff) % partitions,
        );
      }
    }
    // The client's default would put "21" elsewhere on three partitions.
    expect((murmur2(Buffer.from('21')) >>> 0) % 3).not.toBe((java['21']! & 0x7fffffff) % 3);
  });

  it('the relay function needs brokers and a region: a cold start without them names both', () => {
    expect(() => requireKafka(parseConfig({ DATABASE_URL: ENV.DATABASE_URL }))).toThrow(
      'Invalid configuration: KAFKA_BROKERS: required for the relay; AWS_REGION: required for the relay',
    );
    expect(() => parseConfig({ ...ENV, KAFKA_BROKERS: 'no-port' })).toThrow(/KAFKA_BROKERS.*must be host:port/);
  });
});

describe('KafkaOutboxProducer', () => {
  type Sent = SendOptions<string, string, string, string>;

  /** Clients that record their sends; `answer` decides each send's fate (by its number across clients). */
  function recordingClients(answer: (n: number) => Promise<void> = async () => {}) {
    const clients: { sent: Sent[]; closed: boolean }[] = [];
    let sends = 0;
    const create = (): KafkaProducerClient => {
      const client = { sent: [] as Sent[], closed: false };
      clients.push(client);
      return {
        async send(options) {
          client.sent.push(options);
          await answer(sends++);
          return {};
        },
        async close() {
          client.closed = true;
        },
      };
    };
    return { create, clients };
  }

  it('sends the messages to the topic in order with acks=all, keys and headers as given', async () => {
    const { create, clients } = recordingClients();
    const producer = new KafkaOutboxProducer(create);

    await producer.publish('t.v1', [
      { key: 'case_1', value: '{"n":1}', headers: { eventId: 'e1', eventType: 'x' } },
      { key: 'case_1', value: '{"n":2}', headers: { eventId: 'e2', eventType: 'x' } },
    ]);

    expect(clients).toHaveLength(1);
    expect(clients[0]!.sent).toEqual([
      {
        acks: -1,
        messages: [
          { topic: 't.v1', key: 'case_1', value: '{"n":1}', headers: { eventId: 'e1', eventType: 'x' } },
          { topic: 't.v1', key: 'case_1', value: '{"n":2}', headers: { eventId: 'e2', eventType: 'x' } },
        ],
      },
    ]);
  });

  it('one send at a time: lanes publishing side by side queue, each send after the previous was answered', async () => {
    const answers: (() => void)[] = [];
    const { create, clients } = recordingClients(() => new Promise<void>((resolve) => answers.push(resolve)));
    const producer = new KafkaOutboxProducer(create);
    const message = (key: string) => [{ key, value: '{}', headers: {} }];

    const a = producer.publish('t', message('A'));
    const b = producer.publish('t', message('B'));
    await new Promise((r) => setTimeout(r, 20));
    const inFlightBefore = clients[0]!.sent.length;
    answers[0]!();
    await a;
    await new Promise((r) => setTimeout(r, 20));
    answers[1]!();
    await b;

    expect(inFlightBefore).toBe(1);
    expect(clients[0]!.sent.map((s) => s.messages[0]!.key)).toEqual(['A', 'B']);
  });

  it('a failed send closes its client and the next send starts a new one (a new producer id); the queue goes on', async () => {
    const { create, clients } = recordingClients(async (n) => {
      if (n === 1) throw new Error('Request timed out');
    });
    const producer = new KafkaOutboxProducer(create);
    const message = [{ key: 'k', value: 'v', headers: {} }];

    await producer.publish('t', message);
    const failed = producer.publish('t', message);
    const after = producer.publish('t', message);

    await expect(failed).rejects.toBeInstanceOf(KafkaSendError);
    await after;
    expect(clients.map((c) => [c.sent.length, c.closed])).toEqual([
      [2, true],
      [1, false],
    ]);
  });

  it('a failure says what failed down to its root cause, the last attempt’s, and keeps the client’s code', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:9098'), { code: 'ECONNREFUSED' });
    const attempt = (host: string) => new Error(`Connection to ${host}:9098 failed.`, { cause: refused });
    const chain = Object.assign(
      new AggregateError(
        [
          new AggregateError([attempt('b-1')], 'Cannot connect to any broker.'),
          new AggregateError([attempt('b-2')], 'Cannot connect to any broker.'),
        ],
        'initProducerId failed 2 times.',
      ),
      { code: 'PLT_KFK_MULTIPLE' },
    );
    const producer = new KafkaOutboxProducer(() => ({
      send: () => Promise.reject(chain),
      close: async () => {},
    }));

    const error = await producer.publish('t', [{ key: 'k', value: 'v', headers: {} }]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(KafkaSendError);
    expect(error).toMatchObject({
      name: 'KafkaSendError',
      code: 'PLT_KFK_MULTIPLE',
      message:
        'initProducerId failed 2 times: Cannot connect to any broker: Connection to b-2:9098 failed: connect ECONNREFUSED 10.0.0.7:9098',
      cause: chain,
    });
  });
});
