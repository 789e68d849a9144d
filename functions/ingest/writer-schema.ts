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

/** A writer schema as a registry (or a consumer's pinned declaration) gives it. */
export interface SchemaDefinition {
  format: SchemaFormat;
  /** Avro: the schema's JSON; Protobuf: the .proto text; JSON: the JSON Schema. */
  definition: string;
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
