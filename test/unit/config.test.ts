import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULTS, parseConfig, requireConsumerName } from '../../functions/lib/config';
import { CONSUMERS, getConsumer } from '../../functions/consumers';
import { IAM } from './iam-env';

const LOCAL = { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test' };

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('parseConfig', () => {
  it('applies the named defaults', () => {
    const config = parseConfig(LOCAL);
    expect(config.database).toEqual({
      url: LOCAL.DATABASE_URL,
      prepare: true,
      poolMax: DEFAULTS.dbPoolMax,
      idleTimeoutSeconds: DEFAULTS.dbIdleTimeoutSeconds,
      connectTimeoutSeconds: DEFAULTS.dbConnectTimeoutSeconds,
      queryTimeoutMs: DEFAULTS.dbQueryTimeoutMs,
    });
    expect(config.maxPayloadBytes).toBe(262_144);
    expect(config.worker).toEqual({
      batchSize: DEFAULTS.workerBatchSize,
      runLength: DEFAULTS.workerRunLength,
      safetyMarginMs: DEFAULTS.workerSafetyMarginMs,
      leaseSeconds: DEFAULTS.leaseSeconds,
      idleMs: DEFAULTS.workerIdleMs,
      pollMs: DEFAULTS.workerPollMs,
      maxConcurrency: DEFAULTS.workerMaxConcurrency,
      fanOutDrainSeconds: DEFAULTS.workerFanOutDrainSeconds,
    });
    expect(config.wakeUps).toEqual({ enabled: true });
    expect(config.consumerName).toBeUndefined();
  });

  it('reads every variable it is given', () => {
    const config = parseConfig({
      DB_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf',
      DB_HOST: 'proxy.example.internal',
      DB_PREPARE: 'false',
      DB_POOL_MAX: '2',
      DB_SSL: 'verify-full',
      CONSUMER_NAME: 'case-sla',
      MAX_PAYLOAD_BYTES: '1024',
      CONSUMER_DIRECTORY: '/KafkaInbox/dev/consumers/',
      POWERTOOLS_LOG_LEVEL: 'debug',
      WORKER_IDLE_MS: '0',
      WORKER_MAX_CONCURRENCY: '8',
      WAKE_UPS: 'false',
      WORKER_FUNCTION_NAME: 'inbox-case-sla-worker',
      AWS_LAMBDA_FUNCTION_NAME: 'inbox-case-sla-ingest',
    });
    expect(config.database).toMatchObject({
      secretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-AbCdEf',
      hostOverride: 'proxy.example.internal',
      prepare: false,
      poolMax: 2,
      ssl: 'verify-full',
    });
    expect(config.consumerName).toBe('case-sla');
    expect(config.maxPayloadBytes).toBe(1024);
    expect(config.consumerDirectory).toBe('/KafkaInbox/dev/consumers/');
    expect(config.worker).toMatchObject({ idleMs: 0, maxConcurrency: 8 });
    expect(config.wakeUps).toEqual({ enabled: false, workerFunctionName: 'inbox-case-sla-worker', functionName: 'inbox-case-sla-ingest' });
  });

  it('treats empty values as unset', () => {
    expect(parseConfig({ ...LOCAL, DB_POOL_MAX: '', CONSUMER_NAME: '  ' }).database.poolMax).toBe(DEFAULTS.dbPoolMax);
  });

  it('names a missing database variable', () => {
    expect(errorOf(() => parseConfig({})).message).toMatch(
      /DATABASE_URL: set DATABASE_URL \(local\), DB_IAM_USER \(AWS\) or DB_SECRET_ARN/,
    );
  });

  it('refuses both DATABASE_URL and DB_SECRET_ARN', () => {
    const error = errorOf(() => parseConfig({ ...LOCAL, DB_SECRET_ARN: 'arn:aws:secretsmanager:x' }));
    expect(error.message).toMatch(
      /DB_SECRET_ARN: set one of DATABASE_URL, DB_SECRET_ARN and DB_IAM_USER, not DATABASE_URL and DB_SECRET_ARN/,
    );
  });

  it.each([
    ['DATABASE_URL', 'mysql://localhost/db', /DATABASE_URL: must be a postgres:\/\/ URL/],
    ['DB_POOL_MAX', 'four', /DB_POOL_MAX: must be a whole number/],
    ['DB_POOL_MAX', '0', /DB_POOL_MAX: .*>=1/],
    ['DB_PREPARE', 'maybe', /DB_PREPARE/],
    ['MAX_PAYLOAD_BYTES', '1.5', /MAX_PAYLOAD_BYTES: must be a whole number/],
    ['CONSUMER_DIRECTORY', 'KafkaInbox/dev/consumers', /CONSUMER_DIRECTORY: must be an SSM path that starts and ends with \//],
    ['DB_SSL', 'sometimes', /DB_SSL/],
    ['POWERTOOLS_LOG_LEVEL', 'LOUD', /POWERTOOLS_LOG_LEVEL/],
    ['WORKER_MAX_CONCURRENCY', '0', /WORKER_MAX_CONCURRENCY: .*>=1/],
    ['WAKE_UPS', 'sometimes', /WAKE_UPS/],
    ['LOG_LEVEL', 'verbose', /LOG_LEVEL/],
  ])('names a malformed %s', (name, value, pattern) => {
    const error = errorOf(() => parseConfig({ ...LOCAL, [name]: value }));
    expect(error.message).toMatch(pattern);
  });

  it.each([
    ['DB_STATEMENT_TIMEOUT_MS', /DB_STATEMENT_TIMEOUT_MS: no longer read: statement_timeout is a setting of the function's database role/],
    [
      'DB_IDLE_IN_TRANSACTION_TIMEOUT_MS',
      /DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: no longer read: idle_in_transaction_session_timeout is a setting of the function's database role/,
    ],
  ])('refuses %s, a session setting it used to send at connect, saying where it went', (name, pattern) => {
    expect(errorOf(() => parseConfig({ ...LOCAL, [name]: '30000' })).message).toMatch(pattern);
  });

  it('lists every bad variable at once', () => {
    const error = errorOf(() => parseConfig({ ...LOCAL, DB_POOL_MAX: 'x', LEASE_SECONDS: 'y' }));
    expect(error.message).toMatch(/DB_POOL_MAX/);
    expect(error.message).toMatch(/LEASE_SECONDS/);
  });
});

describe('the ingest function’s schema registry', () => {
  const REGISTRY = '{"type":"glue","registryArn":"arn:aws:glue:eu-west-1:123456789012:registry/payments"}';

  it('keeps a Confluent secret’s credentials 300 s by default, or SCHEMA_REGISTRY_SECRET_MAX_AGE_SECONDS', () => {
    expect(parseConfig({ ...LOCAL, SCHEMA_REGISTRY: REGISTRY }).schemaRegistry).toEqual({
      declaration: JSON.parse(REGISTRY),
      timeoutMs: DEFAULTS.schemaRegistryTimeoutMs,
      secretMaxAgeSeconds: 300,
    });
    expect(
      parseConfig({ ...LOCAL, SCHEMA_REGISTRY: REGISTRY, SCHEMA_REGISTRY_SECRET_MAX_AGE_SECONDS: '60' }).schemaRegistry
        ?.secretMaxAgeSeconds,
    ).toBe(60);
    expect(() => parseConfig({ ...LOCAL, SCHEMA_REGISTRY_SECRET_MAX_AGE_SECONDS: '0' })).toThrow(/SCHEMA_REGISTRY_SECRET_MAX_AGE_SECONDS/);
  });
});

describe('consumer selection', () => {
  it('requires CONSUMER_NAME where a function serves one consumer', () => {
    expect(errorOf(() => requireConsumerName(parseConfig(LOCAL))).message).toMatch(/CONSUMER_NAME: required/);
    expect(requireConsumerName(parseConfig({ ...LOCAL, CONSUMER_NAME: 'case-sla' }))).toBe('case-sla');
  });

  it('names an unknown consumer and lists the known ones', () => {
    const error = errorOf(() => getConsumer('case-projector'));
    expect(error.message).toContain(`CONSUMER_NAME: unknown consumer "case-projector" (known: ${CONSUMERS.map((c) => c.name).join(', ')})`);
    expect(error.message).toContain('case-projection, case-sla');
  });
});

describe('IAM database authentication: configuration', () => {
  it('reads the role, endpoint, database and region', () => {
    const { database } = parseConfig(IAM);
    expect(database).toMatchObject({
      iam: { user: 'inbox_worker', region: 'eu-west-1' },
      hostOverride: IAM.DB_HOST,
      port: 5432,
      name: 'inbox',
    });
    expect(database.secretArn).toBeUndefined();
  });

  it('needs the endpoint, database and region, and names each missing one', () => {
    const message = errorOf(() => parseConfig({ DB_IAM_USER: 'inbox_worker' })).message;
    for (const name of ['DB_HOST', 'DB_NAME', 'AWS_REGION']) expect(message).toContain(`${name}: required with DB_IAM_USER`);
  });

  it('refuses TLS that does not verify the server: the token is a credential', () => {
    expect(errorOf(() => parseConfig({ ...IAM, DB_SSL: 'require' })).message).toContain('DB_SSL: must be verify-full with DB_IAM_USER');
  });

  it('refuses a second way to connect beside it', () => {
    expect(errorOf(() => parseConfig({ ...IAM, DB_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:1:secret:x' })).message).toContain(
      'set one of DATABASE_URL, DB_SECRET_ARN and DB_IAM_USER, not DB_SECRET_ARN and DB_IAM_USER',
    );
  });
});
