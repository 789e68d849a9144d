/**
 * Where writer schemas come from: the consumer's registry, by the id a value carries
 * (Confluent REST, confluent-registry.ts; Glue `GetSchemaVersion`, glue-registry.ts),
 * compiled once and kept for the container's life: a registry's id names one schema
 * forever, so a cached schema never goes stale. An id the registry said it does not have is
 * remembered as not found for a while (NOT_FOUND_CACHE), so records naming random ids cost
 * one lookup per id per TTL, not one per id per batch, and cannot spend the registry's quota
 * for every partition; the memory is bounded, the oldest answer forgotten first. An outage
 * is not kept: the next batch asks again. The registry's client is loaded with the first
 * lookup: a consumer whose values name no schema never loads it.
 *
 * Two failures, two outcomes (docs/ingest.md, "Binary values"):
 *   SchemaNotFoundError      the registry answered that it has no such id (Confluent 404,
 *                            Glue EntityNotFoundException) → the record is poison SCHEMA_NOT_FOUND;
 *   RegistryUnavailableError anything else (network, timeout, 5xx, throttling, refused
 *                            credentials) → the record is handed back to the mapping, which
 *                            redelivers it; never poison, since the same record will decode
 *                            once the registry answers.
 */
import type { SchemaRegistry } from '../../framework/schema-registry';
import { refKey, type SchemaRef } from './framing';
import { compileSchema, SchemaCompileError, type CompiledSchema, type SchemaDefinition } from './writer-schema';

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

/** Fetches one writer schema with its references; throws SchemaNotFoundError or RegistryUnavailableError. */
export type SchemaFetcher = (ref: SchemaRef) => Promise<SchemaDefinition>;

export type Resolution =
  { ok: true; schema: CompiledSchema } | { ok: false; error: SchemaNotFoundError | RegistryUnavailableError | SchemaCompileError };

/** Resolved writer schemas for one batch, by refKey. */
export type SchemaTable = ReadonlyMap<string, Resolution>;

export interface SchemaSource {
  /** Each ref's schema, fetched (in parallel) and compiled unless the container has it already. */
  resolve(refs: readonly SchemaRef[]): Promise<SchemaTable>;
}

/**
 * How long, and for how many ids, "not found" is remembered. A schema registered after its
 * id was first asked for (a producer ahead of its registration) is found once the TTL ends;
 * the records read meanwhile are poison SCHEMA_NOT_FOUND, which `ops poison reingest` takes.
 */
export const NOT_FOUND_CACHE = { ttlMs: 5 * 60_000, maxEntries: 10_000 } as const;

export interface SchemaSourceOptions {
  notFound?: { ttlMs: number; maxEntries: number };
  /** The clock, in milliseconds (tests). */
  now?: () => number;
}

export function createSchemaSource(fetcher: SchemaFetcher, options: SchemaSourceOptions = {}): SchemaSource {
  const cache = new Map<string, Promise<CompiledSchema>>();
  const { ttlMs, maxEntries } = options.notFound ?? NOT_FOUND_CACHE;
  const now = options.now ?? Date.now;
  // Insertion order is age order: the first entry is the oldest answer.
  const notFound = new Map<string, { error: SchemaNotFoundError; until: number }>();
  const rememberNotFound = (key: string, error: SchemaNotFoundError): void => {
    notFound.delete(key);
    notFound.set(key, { error, until: now() + ttlMs });
    while (notFound.size > maxEntries) notFound.delete(notFound.keys().next().value!);
  };
  const settle = async (ref: SchemaRef): Promise<Resolution> => {
    const key = refKey(ref);
    const remembered = notFound.get(key);
    if (remembered !== undefined) {
      if (remembered.until > now()) return { ok: false, error: remembered.error };
      notFound.delete(key);
    }
    let pending = cache.get(key);
    if (pending === undefined) {
      pending = fetcher(ref).then(compileSchema);
      cache.set(key, pending);
    }
    try {
      return { ok: true, schema: await pending };
    } catch (error) {
      // A schema that does not compile is kept as it failed; an id the registry lacks, for
      // the TTL only (it may be registered yet); an outage not at all (it ends).
      if (!(error instanceof SchemaCompileError)) cache.delete(key);
      if (error instanceof SchemaNotFoundError) rememberNotFound(key, error);
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

export interface RegistryOptions {
  /** One registry request, at most. */
  timeoutMs: number;
  /** How long a Confluent registry's credentials are used before its secret is read again. */
  secretMaxAgeMs: number;
}

/**
 * The fetcher for a consumer's declared registry. Its client (the Glue client, or the
 * Secrets Manager client for a Confluent registry's credentials) loads with the first
 * lookup; a client that failed to load counts as the registry being unavailable.
 */
export function registryFetcher(registry: SchemaRegistry, options: RegistryOptions): SchemaFetcher {
  const load = async (): Promise<SchemaFetcher> => {
    if (registry.type === 'glue') return (await import('./glue-registry')).declaredGlueFetcher(registry);
    if (registry.authentication !== 'BASIC_AUTH') {
      // Client-certificate authentication from the function is not built: every lookup says so.
      return async () => {
        throw new RegistryUnavailableError('the function reads a Confluent registry with BASIC_AUTH only');
      };
    }
    return (await import('./confluent-registry')).declaredConfluentFetcher(registry, options);
  };
  let loaded: Promise<SchemaFetcher> | undefined;
  return async (ref) => {
    loaded ??= load().catch((error: unknown) => {
      loaded = undefined;
      throw new RegistryUnavailableError('the schema registry client did not load', { cause: error });
    });
    return (await loaded)(ref);
  };
}
