/**
 * How a record's value must be read (JSON text, a pinned schema, a registry's writer
 * schema), and the writer schemas a batch's values name, resolved before any record is
 * decoded (docs/ingest.md, "Binary values").
 */
import { PoisonCodes, type PoisonCode } from '../../ingest/poison-codes';
import { readFraming, refFromMetadata, type RegistryKind, type SchemaRef } from './framing';
import type { SchemaSource, SchemaTable } from './schema-source';
import { valueSchemaOf } from '../../ingest/decode';
import type { KafkaRecord } from '../../ingest/types';
import type { CompiledSchema } from './writer-schema';

/** The writer schemas a record's value may name: a consumer's pinned schema, and those its registry gave for this batch. */
export interface ValueSchemas {
  /** The consumer's `valueSchema`, compiled, with the framing its values carry. */
  pinned?: { schema: CompiledSchema; framing: 'confluent' | 'glue' | 'none' };
  /** Resolved for this batch by the consumer's registry; absent when it declares none. */
  table?: SchemaTable;
}

/** The data formats a registry encodes in binary: their SOURCE bytes are not JSON. */
const BINARY_FORMATS = new Set(['AVRO', 'PROTOBUF']);

/** The first bytes of a value, from the start of its base64: enough for any registry header. */
function peek(value: string): Uint8Array {
  return Buffer.from(value.slice(0, 24), 'base64');
}

export const OPEN_BRACE = 0x7b;

/**
 * How a value must be read, from its first bytes, its schema metadata and the consumer's
 * pinned schema (docs/ingest.md, "Binary values"):
 *   json     JSON text (plain JSON, JSON record format, a JSON Schema SOURCE value);
 *   pinned   the consumer's own schema reads the body (after its declared framing);
 *   lookup   the writer schema the value names, from the registry;
 *   poison   framing this inbox does not read.
 * With AVRO or PROTOBUF metadata, a value starting with `{` is the mapping's JSON record
 * format; anything else is the SOURCE format's body, named by the metadata's schema id.
 */
export type ValueRoute =
  | { kind: 'json' }
  | { kind: 'pinned'; framed: boolean; registry: RegistryKind | 'none' }
  | { kind: 'lookup'; ref: SchemaRef; framed: boolean }
  | { kind: 'source-without-registry' }
  | { kind: 'poison'; code: PoisonCode; message: string };

export const JSON_ROUTE: ValueRoute = { kind: 'json' };

export function routeOf(head: Uint8Array, record: KafkaRecord, schemas: ValueSchemas): ValueRoute {
  const meta = valueSchemaOf(record);
  if (meta !== null && BINARY_FORMATS.has(meta.format)) {
    if (head[0] === OPEN_BRACE) return { kind: 'json' };
    const ref = refFromMetadata(meta.id);
    if (schemas.pinned) return { kind: 'pinned', framed: false, registry: ref?.registry ?? 'none' };
    if (ref === null || schemas.table === undefined) return { kind: 'source-without-registry' };
    return { kind: 'lookup', ref, framed: false };
  }
  if (meta !== null) return { kind: 'json' };
  if (schemas.pinned?.framing === 'none')
    return schemas.pinned.schema.format === 'JSON' ? { kind: 'json' } : { kind: 'pinned', framed: false, registry: 'none' };
  const framing = readFraming(head);
  if (framing.kind === 'none') return { kind: 'json' };
  if (framing.kind === 'unsupported') return { kind: 'poison', code: PoisonCodes.UNSUPPORTED_FRAMING, message: framing.message };
  if (schemas.pinned) return { kind: 'pinned', framed: true, registry: framing.ref.registry };
  return { kind: 'lookup', ref: framing.ref, framed: true };
}

/** The writer schema a record's value names in the registry, or null (none, or not this record's business). Reads only its first bytes. */
export function schemaRefOf(record: KafkaRecord, schemas: ValueSchemas): SchemaRef | null {
  if (typeof record.value !== 'string' || record.value === '') return null;
  const route = routeOf(peek(record.value), record, schemas);
  return route.kind === 'lookup' ? route.ref : null;
}

/**
 * The writer schemas a batch's values name, each asked of `source` once (the source caches
 * them for the container), before any record is decoded: decoding itself stays synchronous.
 */
export async function resolveValueSchemas(
  records: readonly KafkaRecord[],
  options: { pinned?: ValueSchemas['pinned']; source?: SchemaSource },
): Promise<ValueSchemas> {
  const schemas: ValueSchemas = options.pinned === undefined ? {} : { pinned: options.pinned };
  if (options.source === undefined) return schemas;
  const probe: ValueSchemas = { ...schemas, table: new Map() };
  const refs: SchemaRef[] = [];
  for (const record of records) {
    const ref = schemaRefOf(record, probe);
    if (ref !== null) refs.push(ref);
  }
  return { ...schemas, table: refs.length === 0 ? new Map() : await options.source.resolve(refs) };
}
