/**
 * A Confluent Schema Registry over REST, loaded by schema-source.ts with a Confluent
 * consumer's first lookup:
 *
 *   GET {url}/schemas/ids/{id}                       → { schema, schemaType?, references? }
 *   GET {url}/subjects/{subject}/versions/{version}  → the same, for each schema reference
 *
 * No schemaType means Avro. A schema that uses another subject's (an Avro named type, a
 * Protobuf import) lists it as a reference, { name, subject, version }: each is fetched by
 * subject and version, with its own references, and kept for the container's life like the
 * schemas (a subject's version never changes; "latest", -1, is asked each time).
 *
 * Credentials: basic auth from the registry's Secrets Manager secret, kept at most
 * `maxAgeMs`. When the registry refuses them (401, 403), they may have rotated: the secret
 * is read again, once, and the request repeated; refused again, the registry counts as
 * unavailable and the record is handed back. The Secrets Manager client (the runtime's,
 * outside the bundle) is imported when first used: a bundle's static import of an external
 * package would load it at every ingest function's start.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { SchemaRegistry } from '../../framework/schema-registry';
import { RegistryUnavailableError, SchemaNotFoundError, type RegistryOptions, type SchemaFetcher } from './schema-source';
import { SchemaCompileError, type SchemaDefinition, type SchemaFormat, type SchemaReference } from './writer-schema';

export interface BasicCredentials {
  username: string;
  password: string;
}

/** A registry's credentials, cached; `refresh` is asked when the registry refused the ones given. */
export interface RegistryCredentials {
  /** The cached credentials, or the secret read when there are none or they are older than the max age. */
  current(): Promise<BasicCredentials>;
  /** After the registry refused `refused`: the secret read again, unless another lookup already did. */
  refresh(refused: BasicCredentials): Promise<BasicCredentials>;
}

export interface ConfluentOptions {
  url: string;
  /** Basic-auth credentials (from the registry's secret in AWS); none: the registry is asked without. */
  credentials?: RegistryCredentials;
  timeoutMs: number;
  fetch?: typeof fetch;
}

const FORMATS = new Set<SchemaFormat>(['AVRO', 'PROTOBUF', 'JSON']);
/** HTTP statuses that refuse the credentials given. */
const REFUSED = new Set([401, 403]);
/** References within references, at most (Confluent cannot register a cycle; a broken registry could answer one). */
const MAX_REFERENCE_DEPTH = 16;

interface SchemaAnswer {
  schema?: unknown;
  schemaType?: unknown;
  references?: unknown;
}

interface ReferenceEntry {
  name: string;
  subject: string;
  version: number | 'latest';
}

/** A response whose body is not read: its connection is given back at once. */
async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => {});
}

function referenceOf(raw: unknown): ReferenceEntry {
  const r = (typeof raw === 'object' && raw !== null ? raw : {}) as { name?: unknown; subject?: unknown; version?: unknown };
  const versionOk = r.version === -1 || (typeof r.version === 'number' && Number.isInteger(r.version) && r.version >= 1);
  if (typeof r.name !== 'string' || typeof r.subject !== 'string' || r.subject === '' || !versionOk)
    throw new RegistryUnavailableError('the Confluent registry answered a schema reference without name, subject and version');
  return { name: r.name, subject: r.subject, version: r.version === -1 ? 'latest' : (r.version as number) };
}

/** GET requests to the registry, as JSON; refused credentials are read again from the secret once. 404 is SchemaNotFoundError(`missing`). */
function registryRequests(options: ConfluentOptions): (path: string, missing: string) => Promise<SchemaAnswer> {
  const doFetch = options.fetch ?? fetch;
  const base = options.url.replace(/\/+$/, '');

  const send = async (path: string, credentials: BasicCredentials | undefined): Promise<Response> => {
    const headers: Record<string, string> = { accept: 'application/vnd.schemaregistry.v1+json, application/json' };
    if (credentials) headers.authorization = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
    try {
      return await doFetch(`${base}${path}`, { headers, signal: AbortSignal.timeout(options.timeoutMs) });
    } catch (error) {
      throw new RegistryUnavailableError('the Confluent registry could not be reached', { cause: error });
    }
  };

  const read = async (credentials: () => Promise<BasicCredentials>): Promise<BasicCredentials> => {
    try {
      return await credentials();
    } catch (error) {
      if (error instanceof RegistryUnavailableError) throw error;
      throw new RegistryUnavailableError('the registry secret could not be read', { cause: error });
    }
  };

  return async (path, missing) => {
    const source = options.credentials;
    let credentials = source === undefined ? undefined : await read(() => source.current());
    let response = await send(path, credentials);
    if (REFUSED.has(response.status) && source !== undefined && credentials !== undefined) {
      await discard(response);
      const refused = credentials;
      credentials = await read(() => source.refresh(refused));
      response = await send(path, credentials);
      if (REFUSED.has(response.status)) {
        await discard(response);
        throw new RegistryUnavailableError(
          `the Confluent registry refused the credentials (HTTP ${response.status}), also after the secret was read again`,
        );
      }
    }
    if (!response.ok) {
      await discard(response);
      if (response.status === 404) throw new SchemaNotFoundError(missing);
      throw new RegistryUnavailableError(`the Confluent registry answered HTTP ${response.status}`);
    }
    try {
      return (await response.json()) as SchemaAnswer;
    } catch (error) {
      throw new RegistryUnavailableError('the Confluent registry answered something other than JSON', { cause: error });
    }
  };
}

/** Confluent Schema Registry REST, with schema references resolved and refused credentials read again once. */
export function confluentFetcher(options: ConfluentOptions): SchemaFetcher {
  const get = registryRequests(options);
  // Referenced subject versions, resolved with their own references.
  const versions = new Map<string, SchemaDefinition>();

  /** An answer as a definition, its references resolved; `trail` is the subject versions that led here. */
  const definitionOf = async (answer: SchemaAnswer, trail: readonly string[]): Promise<SchemaDefinition> => {
    const format = (typeof answer.schemaType === 'string' ? answer.schemaType.toUpperCase() : 'AVRO') as SchemaFormat;
    if (typeof answer.schema !== 'string' || !FORMATS.has(format))
      throw new RegistryUnavailableError('the Confluent registry answered without a schema');
    if (answer.references === undefined || answer.references === null) return { format, definition: answer.schema };
    if (!Array.isArray(answer.references))
      throw new RegistryUnavailableError('the Confluent registry answered references that are not a list');
    const entries = answer.references.map(referenceOf);
    const references = await Promise.all(entries.map((entry) => resolveReference(entry, trail)));
    return references.length === 0 ? { format, definition: answer.schema } : { format, definition: answer.schema, references };
  };

  const resolveReference = async (entry: ReferenceEntry, trail: readonly string[]): Promise<SchemaReference> => {
    const key = `${entry.subject} version ${entry.version}`;
    if (trail.includes(key) || trail.length >= MAX_REFERENCE_DEPTH) {
      const why = trail.includes(key) ? 'form a cycle' : `nest deeper than ${MAX_REFERENCE_DEPTH} levels`;
      throw new SchemaCompileError(`the schema's references ${why}: ${[...trail, key].join(' → ')}`);
    }
    const cached = versions.get(key);
    if (cached !== undefined) return { name: entry.name, schema: cached };
    const answer = await get(
      `/subjects/${encodeURIComponent(entry.subject)}/versions/${entry.version}`,
      `the registry has no ${key}, which the schema references as ${entry.name}`,
    );
    const schema = await definitionOf(answer, [...trail, key]);
    if (entry.version !== 'latest') versions.set(key, schema);
    return { name: entry.name, schema };
  };

  return async (ref) => {
    if (ref.registry !== 'confluent') throw new SchemaNotFoundError(`a Glue schema version id, but the consumer's registry is Confluent`);
    return definitionOf(await get(`/schemas/ids/${ref.id}`, `the registry has no schema id ${ref.id}`), []);
  };
}

/** The basic-auth credentials a registry's secret holds (`{"username", "password"}`). */
async function readSecret(client: Pick<SecretsManagerClient, 'send'>, secretArn: string): Promise<BasicCredentials> {
  const { GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
  const out = await client.send(new GetSecretValueCommand({ SecretId: secretArn }));
  const parsed = JSON.parse(out.SecretString ?? '{}') as { username?: unknown; password?: unknown };
  if (typeof parsed.username !== 'string' || typeof parsed.password !== 'string') {
    throw new RegistryUnavailableError('the registry secret holds no username and password');
  }
  return { username: parsed.username, password: parsed.password };
}

/**
 * The credentials in a Confluent registry's Secrets Manager secret: read when first needed,
 * again once they are `maxAgeMs` old, and again when the registry refused them (one read
 * for all the lookups it refused). A read that failed is not kept.
 */
export function secretCredentials(
  client: Pick<SecretsManagerClient, 'send'>,
  secretArn: string,
  options: { maxAgeMs: number; now?: () => number },
): RegistryCredentials {
  const now = options.now ?? Date.now;
  let cached: { value: Promise<BasicCredentials>; readAt: number; resolved?: BasicCredentials } | undefined;
  const read = (): Promise<BasicCredentials> => {
    const entry: NonNullable<typeof cached> = { value: readSecret(client, secretArn), readAt: now() };
    cached = entry;
    // Registered before any caller's: `resolved` is set when they see the value.
    entry.value.then(
      (credentials) => {
        entry.resolved = credentials;
      },
      () => {
        if (cached === entry) cached = undefined;
      },
    );
    return entry.value;
  };
  return {
    current: () => (cached !== undefined && now() - cached.readAt < options.maxAgeMs ? cached.value : read()),
    // Credentials other than the refused ones (read, or being read, since) are the new ones.
    refresh: (refused) => (cached !== undefined && cached.resolved !== refused ? cached.value : read()),
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
    credentials: secretCredentials(new SecretsManagerClient({}), registry.secretArn, { maxAgeMs: options.secretMaxAgeMs }),
    timeoutMs: options.timeoutMs,
  });
}
