/**
 * The registry clients the ingest function reads writer schemas with: Glue GetSchemaVersion
 * and the Confluent registry's secret (AWS APIs mocked with aws-sdk-client-mock, the exact
 * commands asserted), the Confluent REST request itself, and what happens when the secret
 * rotates: refused credentials are read again once, and kept no longer than their max age.
 */
import { EntityNotFoundException, GetSchemaVersionCommand, GlueClient } from '@aws-sdk/client-glue';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { confluentFetcher, secretCredentials } from '../../../functions/wings/decoding/confluent-registry';
import { glueFetcher } from '../../../functions/wings/decoding/glue-registry';
import {
  createSchemaSource,
  NOT_FOUND_CACHE,
  registryFetcher,
  RegistryUnavailableError,
  SchemaNotFoundError,
} from '../../../functions/wings/decoding/schema-source';
import type { SchemaRef } from '../../../functions/wings/decoding/framing';
import { schemaRegistrySchema } from '../../../functions/framework/schema-registry';

const VERSION_ID = 'b7a3c8e2-5f14-4d6a-9c0b-1e2f3a4b5c6d';
const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:confluent/payments-AbC123';

const glue = mockClient(GlueClient);
const secrets = mockClient(SecretsManagerClient);
afterEach(() => {
  glue.reset();
  secrets.reset();
});

describe('glueFetcher', () => {
  it("asks GetSchemaVersion for the value's schema version id, and nothing else", async () => {
    glue.on(GetSchemaVersionCommand).resolves({ SchemaDefinition: '"string"', DataFormat: 'AVRO', SchemaVersionId: VERSION_ID });

    const schema = await glueFetcher(new GlueClient({ region: 'eu-west-1' }))({ registry: 'glue', versionId: VERSION_ID });

    expect(schema).toEqual({ format: 'AVRO', definition: '"string"' });
    expect(glue.calls().map((c) => [c.args[0].constructor.name, c.args[0].input])).toEqual([
      ['GetSchemaVersionCommand', { SchemaVersionId: VERSION_ID }],
    ]);
  });

  it('EntityNotFoundException is SchemaNotFoundError; throttling and other errors are RegistryUnavailableError', async () => {
    const fetcher = glueFetcher(new GlueClient({ region: 'eu-west-1' }));
    glue.on(GetSchemaVersionCommand).rejects(new EntityNotFoundException({ message: 'no such version', $metadata: {} }));
    await expect(fetcher({ registry: 'glue', versionId: VERSION_ID })).rejects.toBeInstanceOf(SchemaNotFoundError);

    glue.reset();
    glue.on(GetSchemaVersionCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    await expect(fetcher({ registry: 'glue', versionId: VERSION_ID })).rejects.toBeInstanceOf(RegistryUnavailableError);
  });
});

describe('the Confluent registry', () => {
  it('sends GET /schemas/ids/{id} with basic auth from the secret, read once', async () => {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: JSON.stringify({ username: 'reader', password: 'pw' }) });
    const requests: Array<{ url: string; authorization: string | undefined }> = [];
    const fetcher = confluentFetcher({
      url: 'https://registry.example.com/',
      credentials: secretCredentials(new SecretsManagerClient({ region: 'eu-west-1' }), SECRET_ARN, { maxAgeMs: 300_000 }),
      timeoutMs: 1_000,
      fetch: (async (url: string, init: RequestInit) => {
        requests.push({ url, authorization: (init.headers as Record<string, string>).authorization });
        return new Response(JSON.stringify({ schema: 'syntax = "proto3"; message M {}', schemaType: 'PROTOBUF' }), { status: 200 });
      }) as unknown as typeof fetch,
    });

    const first = await fetcher({ registry: 'confluent', id: 7 });
    await fetcher({ registry: 'confluent', id: 8 });

    expect(first).toEqual({ format: 'PROTOBUF', definition: 'syntax = "proto3"; message M {}' });
    const basic = `Basic ${Buffer.from('reader:pw').toString('base64')}`;
    expect(requests).toEqual([
      { url: 'https://registry.example.com/schemas/ids/7', authorization: basic },
      { url: 'https://registry.example.com/schemas/ids/8', authorization: basic },
    ]);
    expect(secrets.calls().map((c) => c.args[0].input)).toEqual([{ SecretId: SECRET_ARN }]);
  });

  it('a secret without username and password makes the registry unavailable, not the record poison', async () => {
    secrets.on(GetSecretValueCommand).resolves({ SecretString: '{"apiKey":"x"}' });
    const fetcher = confluentFetcher({
      url: 'https://registry.example.com',
      credentials: secretCredentials(new SecretsManagerClient({ region: 'eu-west-1' }), SECRET_ARN, { maxAgeMs: 300_000 }),
      timeoutMs: 1_000,
      fetch: (async () => new Response('{}')) as unknown as typeof fetch,
    });

    await expect(fetcher({ registry: 'confluent', id: 1 })).rejects.toBeInstanceOf(RegistryUnavailableError);
  });

  it.each([
    [404, SchemaNotFoundError],
    [401, RegistryUnavailableError],
    [500, RegistryUnavailableError],
  ])('HTTP %i is %o', async (status, kind) => {
    const fetcher = confluentFetcher({
      url: 'https://registry.example.com',
      timeoutMs: 1_000,
      fetch: (async () => new Response('{"error_code":40403}', { status })) as unknown as typeof fetch,
    });
    await expect(fetcher({ registry: 'confluent', id: 1 })).rejects.toBeInstanceOf(kind);
  });
});

describe('the Confluent registry’s credentials, when the secret rotates', () => {
  const OLD = { username: 'reader', password: 'old' };
  const NEW = { username: 'reader', password: 'new' };
  const secretOf = (c: { username: string; password: string }) => ({ SecretString: JSON.stringify(c) });
  const basic = (c: { username: string; password: string }) => `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;

  /**
   * A registry that accepts `accepted` credentials only, refusing others with `status`;
   * records the authorization of every request. `fetcher` reads it with the secret's credentials.
   */
  function registryAccepting(accepted: () => { username: string; password: string } | null, status = 401) {
    const seen: (string | undefined)[] = [];
    const fetch = (async (_url: string, init: RequestInit) => {
      const authorization = (init.headers as Record<string, string>).authorization;
      seen.push(authorization);
      const ok = accepted();
      if (ok === null || authorization !== basic(ok)) return new Response('{"error_code":40101}', { status });
      return new Response(JSON.stringify({ schema: '"string"' }), { status: 200 });
    }) as unknown as typeof globalThis.fetch;
    return {
      fetcher: confluentFetcher({ url: 'https://registry.example.com', credentials: credentials(), timeoutMs: 1_000, fetch }),
      seen,
    };
  }

  const credentials = (now?: () => number) =>
    secretCredentials(new SecretsManagerClient({ region: 'eu-west-1' }), SECRET_ARN, { maxAgeMs: 60_000, ...(now ? { now } : {}) });

  it('a 401 reads the secret again, once, and the repeated request with the new credentials gets the schema', async () => {
    secrets.on(GetSecretValueCommand).resolvesOnce(secretOf(OLD)).resolves(secretOf(NEW));
    const registry = registryAccepting(() => NEW);
    const fetcher = registry.fetcher;

    const schema = await fetcher({ registry: 'confluent', id: 1 });
    await fetcher({ registry: 'confluent', id: 2 });

    expect(schema).toEqual({ format: 'AVRO', definition: '"string"' });
    expect(registry.seen).toEqual([basic(OLD), basic(NEW), basic(NEW)]);
    expect(secrets.commandCalls(GetSecretValueCommand).map((c) => c.args[0].input)).toEqual([
      { SecretId: SECRET_ARN },
      { SecretId: SECRET_ARN },
    ]);
  });

  it('lookups refused together read the secret once between them', async () => {
    secrets.on(GetSecretValueCommand).resolvesOnce(secretOf(OLD)).resolves(secretOf(NEW));
    const registry = registryAccepting(() => NEW, 403);
    const fetcher = registry.fetcher;

    const schemas = await Promise.all([1, 2, 3].map((id) => fetcher({ registry: 'confluent', id })));

    expect(schemas).toHaveLength(3);
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
    expect(registry.seen.filter((a) => a === basic(NEW))).toHaveLength(3);
  });

  it('refused again with the secret read anew: the registry is unavailable (the record is handed back), saying so', async () => {
    secrets.on(GetSecretValueCommand).resolves(secretOf(OLD));
    const registry = registryAccepting(() => null);
    const fetcher = registry.fetcher;

    const error = await fetcher({ registry: 'confluent', id: 1 }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(RegistryUnavailableError);
    expect((error as Error).message).toBe(
      'the Confluent registry refused the credentials (HTTP 401), also after the secret was read again',
    );
    expect(registry.seen).toHaveLength(2);
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('the cached credentials are read again once they are older than the max age', async () => {
    secrets.on(GetSecretValueCommand).resolvesOnce(secretOf(OLD)).resolves(secretOf(NEW));
    let clock = 1_000_000;
    const cached = credentials(() => clock);

    const first = await cached.current();
    clock += 59_999;
    const stillCached = await cached.current();
    clock += 1;
    const reread = await cached.current();

    expect([first, stillCached, reread]).toEqual([OLD, OLD, NEW]);
    expect(secrets.commandCalls(GetSecretValueCommand)).toHaveLength(2);
  });

  it('a secret read that failed is not kept: the next lookup reads it again', async () => {
    secrets
      .on(GetSecretValueCommand)
      .rejectsOnce(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }))
      .resolves(secretOf(OLD));
    const registry = registryAccepting(() => OLD);
    const fetcher = registry.fetcher;

    const failed = await fetcher({ registry: 'confluent', id: 1 }).catch((e: unknown) => e);
    const schema = await fetcher({ registry: 'confluent', id: 1 });

    expect(failed).toBeInstanceOf(RegistryUnavailableError);
    expect((failed as Error).message).toBe('the registry secret could not be read');
    expect(schema).toEqual({ format: 'AVRO', definition: '"string"' });
    expect(registry.seen).toEqual([basic(OLD)]);
  });
});

describe('registryFetcher', () => {
  it('a Glue registry’s client, in the registry’s region, reads the schema version with the first lookup', async () => {
    glue.on(GetSchemaVersionCommand).resolves({ SchemaDefinition: '"string"', DataFormat: 'AVRO', SchemaVersionId: VERSION_ID });
    const fetcher = registryFetcher(
      schemaRegistrySchema.parse({ type: 'glue', registryArn: 'arn:aws:glue:eu-central-1:123456789012:registry/payments' }),
      { timeoutMs: 1_000, secretMaxAgeMs: 300_000 },
    );

    expect(await fetcher({ registry: 'glue', versionId: VERSION_ID })).toEqual({ format: 'AVRO', definition: '"string"' });
    expect(glue.commandCalls(GetSchemaVersionCommand).map((c) => c.args[0].input)).toEqual([{ SchemaVersionId: VERSION_ID }]);
    expect(await glue.commandCalls(GetSchemaVersionCommand)[0]!.thisValue.config.region()).toBe('eu-central-1');
  });

  it('a Confluent registry with client-certificate authentication: every lookup is unavailable, saying why', async () => {
    const fetcher = registryFetcher(
      schemaRegistrySchema.parse({
        type: 'confluent',
        url: 'https://psrc-abc12.eu-west-1.aws.confluent.cloud',
        authentication: 'CLIENT_CERTIFICATE_TLS_AUTH',
        secretArn: SECRET_ARN,
      }),
      { timeoutMs: 1_000, secretMaxAgeMs: 300_000 },
    );

    await expect(fetcher({ registry: 'confluent', id: 1 })).rejects.toThrow(
      new RegistryUnavailableError('the function reads a Confluent registry with BASIC_AUTH only'),
    );
    expect(secrets.calls()).toEqual([]);
  });
});

describe('unknown schema ids', () => {
  const glueSource = (options: Parameters<typeof createSchemaSource>[1]) =>
    createSchemaSource(
      registryFetcher(schemaRegistrySchema.parse({ type: 'glue', registryArn: 'arn:aws:glue:eu-west-1:123456789012:registry/payments' }), {
        timeoutMs: 1_000,
        secretMaxAgeMs: 300_000,
      }),
      options,
    );
  const versionIdsAsked = () => glue.commandCalls(GetSchemaVersionCommand).map((c) => c.args[0].input.SchemaVersionId);

  it('1,000 random ids over 20 batches cost one GetSchemaVersion each, each record still not found with its reason', async () => {
    glue.on(GetSchemaVersionCommand).rejects(new EntityNotFoundException({ message: 'no such version', $metadata: {} }));
    let clock = 0;
    const source = glueSource({ now: () => clock });
    const ids = Array.from({ length: 1_000 }, () => randomUUID());
    const refs = ids.map((versionId): SchemaRef => ({ registry: 'glue', versionId }));

    // Each batch names 500 of the ids (a window that moves by 250): every id is in ten batches.
    const resolutions = [];
    for (let b = 0; b < 20; b++) {
      clock += 1_000;
      const batch = Array.from({ length: 500 }, (_, j) => refs[(b * 250 + j) % refs.length]!);
      resolutions.push(...(await source.resolve(batch)).values());
    }

    expect(versionIdsAsked()).toHaveLength(1_000);
    expect(new Set(versionIdsAsked())).toEqual(new Set(ids));
    expect(resolutions).toHaveLength(20 * 500);
    for (const r of resolutions) {
      expect(r.ok).toBe(false);
      expect(!r.ok && r.error).toBeInstanceOf(SchemaNotFoundError);
    }
    expect(!resolutions[0]!.ok && resolutions[0]!.error.message).toBe(`the registry has no schema version ${ids[0]}`);

    // Past the TTL an id is asked again: it may have been registered since.
    clock += NOT_FOUND_CACHE.ttlMs;
    await source.resolve(refs.slice(0, 10));
    expect(versionIdsAsked()).toHaveLength(1_010);
  });

  it('remembers a bounded number of ids, forgetting the oldest answer first; an outage is not remembered', async () => {
    glue.on(GetSchemaVersionCommand).rejects(new EntityNotFoundException({ message: 'no such version', $metadata: {} }));
    const source = glueSource({ notFound: { ttlMs: 60_000, maxEntries: 100 } });
    const refs = Array.from({ length: 1_000 }, (): SchemaRef => ({ registry: 'glue', versionId: randomUUID() }));

    await source.resolve(refs);
    await source.resolve([refs[999]!, refs[900]!]); // the newest 100: remembered
    expect(versionIdsAsked()).toHaveLength(1_000);
    await source.resolve([refs[0]!]); // the oldest: forgotten, asked again
    expect(versionIdsAsked()).toHaveLength(1_001);

    glue.reset();
    glue.on(GetSchemaVersionCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    const throttled = glueSource({});
    const [first] = (await throttled.resolve([refs[1]!])).values();
    await throttled.resolve([refs[1]!]);
    expect(!first!.ok && first!.error).toBeInstanceOf(RegistryUnavailableError);
    expect(versionIdsAsked()).toEqual([
      refs[1]!.registry === 'glue' && refs[1]!.versionId,
      refs[1]!.registry === 'glue' && refs[1]!.versionId,
    ]);
  });
});
