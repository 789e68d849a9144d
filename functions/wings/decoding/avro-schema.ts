/**
 * Avro writer schemas (avsc), loaded by writer-schema.ts when a consumer's first Avro schema
 * is compiled: records → objects in field order; a union of null and one type → the value
 * or null; a union whose branches JavaScript cannot tell apart (two records, int and long)
 * → { "<branch name>": value }, as Avro's own JSON encoding writes it; long → the exact
 * integer (a JSON number with all its digits, beyond 2^53 too); bytes and fixed → base64;
 * enum → its symbol; map → object. Logical types: timestamp-millis and timestamp-micros →
 * ISO-8601 UTC text (microseconds kept), date → YYYY-MM-DD, decimal → its exact decimal
 * text ("12.50" at scale 2), uuid → the text.
 *
 * A schema may use named types other subjects define (Confluent schema references): those
 * schemas are compiled first into the same registry of names, each before the schemas that
 * use it, so the schema finds them by their full names.
 */
import avro from 'avsc';
import { isoOf } from './epoch-text';
import { toJsonText } from '../../ingest/json-text';
import { referencesInOrder, SchemaCompileError, type CompiledSchema, type SchemaDefinition } from './writer-schema';

/** Avro's long as a bigint, both ways (avsc's own refuses values beyond 2^53). Producers in tests and tools share it. */
export const BigIntLong = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => buf.readBigInt64LE(),
  toBuffer: (n: bigint) => {
    const buf = Buffer.alloc(8);
    buf.writeBigInt64LE(BigInt(n));
    return buf;
  },
  fromJSON: (v: number | string) => BigInt(v),
  toJSON: (n: bigint) => Number(n),
  isValid: (n: unknown) => typeof n === 'bigint',
  compare: (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0),
});

abstract class ReadOnlyLogicalType extends avro.types.LogicalType {
  protected override _toValue(): never {
    throw new Error('this inbox only reads Avro');
  }
}

class TimestampMillis extends ReadOnlyLogicalType {
  protected override _fromValue(v: bigint | number): string {
    return isoOf(BigInt(v), 1n, 3);
  }
}
class TimestampMicros extends ReadOnlyLogicalType {
  protected override _fromValue(v: bigint | number): string {
    return isoOf(BigInt(v), 1_000n, 6);
  }
}
class DateType extends ReadOnlyLogicalType {
  protected override _fromValue(days: number): string {
    return new Date(days * 86_400_000).toISOString().slice(0, 10);
  }
}
class UuidType extends ReadOnlyLogicalType {
  protected override _fromValue(v: string): string {
    return v;
  }
}
class DecimalType extends ReadOnlyLogicalType {
  private readonly scale: number;
  constructor(schema: avro.Schema, opts?: unknown) {
    super(schema, opts);
    const scale = (schema as { scale?: unknown }).scale;
    this.scale = typeof scale === 'number' && Number.isInteger(scale) && scale >= 0 ? scale : 0;
  }
  protected override _fromValue(bytes: Buffer): string {
    if (bytes.length === 0) return '0';
    let unscaled = BigInt(`0x${bytes.toString('hex')}`);
    if (bytes[0]! & 0x80) unscaled -= 1n << BigInt(bytes.length * 8); // two's complement
    const negative = unscaled < 0n;
    const digits = (negative ? -unscaled : unscaled).toString().padStart(this.scale + 1, '0');
    const text = this.scale === 0 ? digits : `${digits.slice(0, -this.scale)}.${digits.slice(-this.scale)}`;
    return negative ? `-${text}` : text;
  }
}

const LOGICAL_TYPES = {
  'timestamp-millis': TimestampMillis,
  'timestamp-micros': TimestampMicros,
  'local-timestamp-millis': TimestampMillis,
  'local-timestamp-micros': TimestampMicros,
  date: DateType,
  uuid: UuidType,
  decimal: DecimalType,
};

/**
 * Every Avro long read as a bigint (avsc's own long refuses values beyond 2^53): the named
 * `long`, the `{ "type": "long" }` form, and the long under a logical type. avsc asks this
 * hook for a logical type's schema twice, once for the logical type and once, with the
 * same object, for its underlying type: the second time gets the bigint long.
 */
function longHook(): (schema: avro.Schema) => avro.Type | undefined {
  const seen = new WeakSet<object>();
  return (schema) => {
    if (schema === 'long') return BigIntLong;
    if (typeof schema !== 'object' || schema === null || (schema as { type?: unknown }).type !== 'long') return undefined;
    const logical = (schema as { logicalType?: unknown }).logicalType;
    if (typeof logical === 'string' && logical in LOGICAL_TYPES && !seen.has(schema)) {
      seen.add(schema);
      return undefined;
    }
    return BigIntLong;
  };
}

export function compileAvro(schema: SchemaDefinition): CompiledSchema {
  let type: avro.Type;
  // A fresh registry of names per schema: named types of one schema must not leak into
  // another; its references' types are registered in it first.
  const options: Partial<avro.ForSchemaOptions> = {
    typeHook: longHook() as avro.ForSchemaOptions['typeHook'],
    logicalTypes: LOGICAL_TYPES,
    wrapUnions: 'auto',
    registry: {},
  };
  try {
    for (const reference of referencesInOrder(schema)) {
      if (reference.schema.format !== 'AVRO')
        throw new SchemaCompileError(`the Avro schema references ${reference.name}, a ${reference.schema.format} schema`);
      avro.Type.forSchema(JSON.parse(reference.schema.definition) as avro.Schema, options);
    }
    type = avro.Type.forSchema(JSON.parse(schema.definition) as avro.Schema, options);
  } catch (error) {
    if (error instanceof SchemaCompileError) throw error;
    throw new SchemaCompileError('the Avro schema does not parse', { cause: error });
  }
  return {
    format: 'AVRO',
    decode(body, _registry, maxDepth) {
      // fromBuffer refuses a body with bytes left over, as well as a truncated one.
      const value = type.fromBuffer(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
      return { json: toJsonText(value, maxDepth) };
    },
  };
}
