/**
 * A Confluent Schema Registry over REST, loaded by schema-source.ts with a Confluent
 * consumer's first lookup: `GET {url}/schemas/ids/{id}` → `{ schema, schemaType? }` (no
 * schemaType: Avro), with basic-auth credentials from the registry's Secrets Manager
 * secret. The Secrets Manager client (the runtime's, outside the bundle) is imported when
 * first used: a bundle's static import of an external package would load it at every ingest
 * function's start.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SchemaRegistry } from '../framework/schema-registry';
import { RegistryUnavailableError, SchemaNotFoundError, type RegistryOptions, type SchemaFetcher } from './schema-source';
import type { SchemaFormat } from './writer-schema';

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

/** The credentials in a Confluent registry's Secrets Manager secret (`{"username", "password"}`), read once. */
export function secretCredentials(
  client: Pick<SecretsManagerClient, 'send'>,
  secretArn: string,
): () => Promise<{ username: string; password: string }> {
  let pending: Promise<{ username: string; password: string }> | undefined;
  return () => {
    pending ??= (async () => {
      const { GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
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

/** The declared Confluent registry's fetcher, its credentials from the declared secret. */
export async function declaredConfluentFetcher(
  registry: Extract<SchemaRegistry, { type: 'confluent' }>,
  options: RegistryOptions,
): Promise<SchemaFetcher> {
  const { SecretsManagerClient } = await import('@aws-sdk/client-secrets-manager');
  return confluentFetcher({
    url: registry.url,
    credentials: secretCredentials(new SecretsManagerClient({}), registry.secretArn),
    timeoutMs: options.timeoutMs,
  });
}
