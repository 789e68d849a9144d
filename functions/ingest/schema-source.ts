/**
 * Where writer schemas come from: the consumer's registry, by the id a value carries
 * (Confluent REST `GET /schemas/ids/{id}`; Glue `GetSchemaVersion`), compiled once and kept
 * for the container's life: a registry's id names one schema forever, so a cached schema
 * never goes stale. A lookup that failed is not kept: the next batch asks again.
 *
 * Two failures, two outcomes (docs/ingest.md, "Binary values"):
 *   SchemaNotFoundError      the registry answered that it has no such id (Confluent 404,
 *                            Glue EntityNotFoundException) → the record is poison SCHEMA_NOT_FOUND;
 *   RegistryUnavailableError anything else (network, timeout, 5xx, throttling, refused
 *                            credentials) → the record is handed back to the mapping, which
 *                            redelivers it; never poison, since the same record will decode
 *                            once the registry answers.
 */
import { EntityNotFoundException, GetSchemaVersionCommand, GlueClient } from '@aws-sdk/client-glue';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SchemaRegistry } from '../framework/schema-registry';
import { refKey, type SchemaRef } from './framing';
import { compileSchema, SchemaCompileError, type CompiledSchema, type SchemaDefinition, type SchemaFormat } from './writer-schema';

export class SchemaNotFoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SchemaNotFoundError';
  }
}

export class RegistryUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RegistryUnavailableError';
  }
}

/** Fetches one writer schema; throws SchemaNotFoundError or RegistryUnavailableError. */
export type SchemaFetcher = (ref: SchemaRef) => Promise<SchemaDefinition>;

export type Resolution =
  { ok: true; schema: CompiledSchema } | { ok: false; error: SchemaNotFoundError | RegistryUnavailableError | SchemaCompileError };

/** Resolved writer schemas for one batch, by refKey. */
export type SchemaTable = ReadonlyMap<string, Resolution>;

export interface SchemaSource {
  /** Each ref's schema, fetched (in parallel) and compiled unless the container has it already. */
  resolve(refs: readonly SchemaRef[]): Promise<SchemaTable>;
}

export function createSchemaSource(fetcher: SchemaFetcher): SchemaSource {
  const cache = new Map<string, Promise<CompiledSchema>>();
  const settle = async (ref: SchemaRef): Promise<Resolution> => {
    const key = refKey(ref);
    let pending = cache.get(key);
    if (pending === undefined) {
      pending = fetcher(ref).then(compileSchema);
      cache.set(key, pending);
    }
    try {
      return { ok: true, schema: await pending };
    } catch (error) {
      // Only a schema that does not compile is kept as it failed: an id the registry lacks
      // today may be restored, and an outage ends.
      if (!(error instanceof SchemaCompileError)) cache.delete(key);
      const known =
        error instanceof SchemaNotFoundError || error instanceof RegistryUnavailableError || error instanceof SchemaCompileError;
      return { ok: false, error: known ? error : new RegistryUnavailableError('the schema lookup failed unexpectedly', { cause: error }) };
    }
  };
  return {
    async resolve(refs) {
      const unique = new Map(refs.map((r) => [refKey(r), r]));
      const entries = await Promise.all([...unique].map(async ([key, ref]) => [key, await settle(ref)] as const));
      return new Map(entries);
    },
  };
}

const FORMATS = new Set<SchemaFormat>(['AVRO', 'PROTOBUF', 'JSON']);

export interface ConfluentOptions {
  url: string;
  /** Basic-auth credentials, read when first needed (from the registry's secret in AWS). */
  credentials?: () => Promise<{ username: string; password: string } | null>;
  timeoutMs: number;
  fetch?: typeof fetch;
}

/** Confluent Schema Registry REST: `GET {url}/schemas/ids/{id}` → `{ schema, schemaType? }` (no schemaType: Avro). */
export function confluentFetcher(options: ConfluentOptions): SchemaFetcher {
  const doFetch = options.fetch ?? fetch;
  const base = options.url.replace(/\/+$/, '');
  return async (ref) => {
    if (ref.registry !== 'confluent') throw new SchemaNotFoundError(`a Glue schema version id, but the consumer's registry is Confluent`);
    const headers: Record<string, string> = { accept: 'application/vnd.schemaregistry.v1+json, application/json' };
    let response: Response;
    try {
      const credentials = await options.credentials?.();
      if (credentials) headers.authorization = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
      response = await doFetch(`${base}/schemas/ids/${ref.id}`, { headers, signal: AbortSignal.timeout(options.timeoutMs) });
    } catch (error) {
      throw new RegistryUnavailableError('the Confluent registry could not be reached', { cause: error });
    }
    if (response.status === 404) throw new SchemaNotFoundError(`the registry has no schema id ${ref.id}`);
    if (!response.ok) throw new RegistryUnavailableError(`the Confluent registry answered HTTP ${response.status}`);
    let body: { schema?: unknown; schemaType?: unknown; references?: unknown };
    try {
      body = (await response.json()) as typeof body;
    } catch (error) {
      throw new RegistryUnavailableError('the Confluent registry answered something other than JSON', { cause: error });
    }
    const format = (typeof body.schemaType === 'string' ? body.schemaType.toUpperCase() : 'AVRO') as SchemaFormat;
    if (typeof body.schema !== 'string' || !FORMATS.has(format))
      throw new RegistryUnavailableError('the Confluent registry answered without a schema');
    return { format, definition: body.schema };
  };
}

/** AWS Glue Schema Registry: `GetSchemaVersion` by the 16-byte schema version id a value carries. */
export function glueFetcher(client: Pick<GlueClient, 'send'>): SchemaFetcher {
  return async (ref) => {
    if (ref.registry !== 'glue') throw new SchemaNotFoundError(`a Confluent schema id, but the consumer's registry is Glue`);
    let out;
    try {
      out = await client.send(new GetSchemaVersionCommand({ SchemaVersionId: ref.versionId }));
    } catch (error) {
      if (error instanceof EntityNotFoundException || (error as { name?: string }).name === 'EntityNotFoundException') {
        throw new SchemaNotFoundError(`the registry has no schema version ${ref.versionId}`);
      }
      throw new RegistryUnavailableError('the Glue schema registry could not be read', { cause: error });
    }
    const format = out.DataFormat as SchemaFormat | undefined;
    if (out.SchemaDefinition === undefined || format === undefined || !FORMATS.has(format)) {
      throw new RegistryUnavailableError('GetSchemaVersion answered without a schema definition');
    }
    return { format, definition: out.SchemaDefinition };
  };
}

/** The credentials in a Confluent registry's Secrets Manager secret (`{"username", "password"}`), read once. */
export function secretCredentials(
  client: Pick<SecretsManagerClient, 'send'>,
  secretArn: string,
): () => Promise<{ username: string; password: string }> {
  let pending: Promise<{ username: string; password: string }> | undefined;
  return () => {
    pending ??= (async () => {
      const out = await client.send(new GetSecretValueCommand({ SecretId: secretArn }));
      const parsed = JSON.parse(out.SecretString ?? '{}') as { username?: unknown; password?: unknown };
      if (typeof parsed.username !== 'string' || typeof parsed.password !== 'string') {
        throw new RegistryUnavailableError('the registry secret holds no username and password');
      }
      return { username: parsed.username, password: parsed.password };
    })().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}

/** The fetcher for a consumer's declared registry, with the AWS clients the function uses. */
export function registryFetcher(registry: SchemaRegistry, options: { timeoutMs: number }): SchemaFetcher {
  if (registry.type === 'glue') {
    const region = registry.registryArn.split(':')[3];
    return glueFetcher(new GlueClient(region ? { region } : {}));
  }
  if (registry.authentication !== 'BASIC_AUTH') {
    // Client-certificate authentication from the function is not built: every lookup says so.
    return async () => {
      throw new RegistryUnavailableError('the function reads a Confluent registry with BASIC_AUTH only');
    };
  }
  return confluentFetcher({
    url: registry.url,
    credentials: secretCredentials(new SecretsManagerClient({}), registry.secretArn),
    timeoutMs: options.timeoutMs,
  });
}

/** A schema shipped with the consumer (its declaration's `valueSchema`): every value is read with it. */
export function pinnedSchema(schema: SchemaDefinition): CompiledSchema {
  return compileSchema(schema);
}
