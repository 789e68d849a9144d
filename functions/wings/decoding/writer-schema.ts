/**
 * A writer schema, compiled once per container, turns a value's body into JSON text that
 * the envelope steps then judge like any JSON value (docs/ingest.md, "Typed mapping").
 *
 * The decoders load on demand: avro-schema.ts (avsc) when the first Avro schema is
 * compiled, protobuf-schema.ts (protobufjs) with the first Protobuf one. A consumer whose
 * values are JSON never loads either, and pays for neither at its cold start.
 *
 * JSON Schema: the body is the producer's JSON text, passed on as it is.
 */
import type { RegistryKind } from './framing';

export type SchemaFormat = 'AVRO' | 'PROTOBUF' | 'JSON';

/** A schema another one uses (a Confluent schema reference), resolved: the name it is used by and its own definition. */
export interface SchemaReference {
  /** Avro: the full name of the type it defines; Protobuf: the path the .proto imports. */
  name: string;
  schema: SchemaDefinition;
}

/** A writer schema as a registry (or a consumer's pinned declaration) gives it. */
export interface SchemaDefinition {
  format: SchemaFormat;
  /** Avro: the schema's JSON; Protobuf: the .proto text; JSON: the JSON Schema. */
  definition: string;
  /** The schemas it uses, each with its own references. */
  references?: readonly SchemaReference[];
}

export interface CompiledSchema {
  format: SchemaFormat;
  /**
   * The body as JSON text (JSON: the body's own text, undecoded). Throws when the body does
   * not decode with this schema; `registry` says how a Protobuf body names its message.
   */
  decode(body: Uint8Array, registry: RegistryKind | 'none', maxDepth: number): { json: string } | { text: Uint8Array };
}

export class SchemaCompileError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SchemaCompileError';
  }
}

/**
 * A schema's references, all of them, each after the references it uses itself and each
 * once (by name): the order a compiler must read them in before the schema.
 */
export function referencesInOrder(schema: SchemaDefinition): SchemaReference[] {
  const ordered: SchemaReference[] = [];
  const seen = new Set<string>();
  const visit = (references: readonly SchemaReference[] | undefined) => {
    for (const reference of references ?? []) {
      if (seen.has(reference.name)) continue;
      seen.add(reference.name);
      visit(reference.schema.references);
      ordered.push(reference);
    }
  };
  visit(schema.references);
  return ordered;
}

const JSON_SCHEMA: CompiledSchema = {
  format: 'JSON',
  decode: (body) => ({ text: body }),
};

export async function compileSchema(schema: SchemaDefinition): Promise<CompiledSchema> {
  switch (schema.format) {
    case 'AVRO':
      return (await import('./avro-schema')).compileAvro(schema);
    case 'PROTOBUF':
      return (await import('./protobuf-schema')).compileProtobuf(schema);
    case 'JSON':
      return JSON_SCHEMA;
  }
}
