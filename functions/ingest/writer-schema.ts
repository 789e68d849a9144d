/**
 * A writer schema, compiled once per container, turns a value's body into JSON text that
 * the envelope steps then judge like any JSON value (docs/ingest.md, "Typed mapping").
 *
 * Avro (avsc): records → objects in field order; a union of null and one type → the value
 * or null; a union whose branches JavaScript cannot tell apart (two records, int and long)
 * → { "<branch name>": value }, as Avro's own JSON encoding writes it; long → the exact
 * integer (a JSON number with all its digits, beyond 2^53 too); bytes and fixed → base64;
 * enum → its symbol; map → object. Logical types: timestamp-millis and timestamp-micros →
 * ISO-8601 UTC text (microseconds kept), date → YYYY-MM-DD, decimal → its exact decimal
 * text ("12.50" at scale 2), uuid → the text.
 *
 * Protobuf (protobufjs): field names as the .proto declares them; every field present (proto3
 * defaults included); enums → their names; int64/uint64/fixed64 → exact integers; bytes →
 * base64; maps → objects; google.protobuf.Timestamp → ISO-8601 UTC text (nanoseconds kept).
 *
 * JSON Schema: the body is the producer's JSON text, passed on as it is.
 */
import avro from 'avsc';
import protobuf from 'protobufjs';
import { readMessageIndexes, type RegistryKind } from './framing';
import { toJsonText } from './json-text';

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

// ---- Avro -------------------------------------------------------------------------------

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

const floorDiv = (a: bigint, b: bigint) => (a >= 0n ? a / b : -((-a + b - 1n) / b));

/** Epoch units → ISO-8601 UTC with `digits` fractional digits. */
function isoOf(units: bigint, perMilli: bigint, digits: number): string {
  const ms = floorDiv(units, perMilli);
  const iso = new Date(Number(ms)).toISOString(); // throws RangeError beyond year ±275760
  if (perMilli === 1n) return iso;
  const sub = (units - ms * perMilli).toString().padStart(digits - 3, '0');
  return `${iso.slice(0, -1)}${sub}Z`;
}

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

function compileAvro(definition: string): CompiledSchema {
  let type: avro.Type;
  try {
    // A fresh registry per schema: named types of one schema must not leak into another.
    type = avro.Type.forSchema(JSON.parse(definition) as avro.Schema, {
      typeHook: longHook() as avro.ForSchemaOptions['typeHook'],
      logicalTypes: LOGICAL_TYPES,
      wrapUnions: 'auto',
    });
  } catch (error) {
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

// ---- Protobuf ---------------------------------------------------------------------------

const NANOS = 1_000_000_000;
// Applied to every google.protobuf.Timestamp of every schema compiled here: its JSON form is the ISO text.
protobuf.wrappers['.google.protobuf.Timestamp'] = {
  // protobufjs types a wrapper's result as an object; any value works, and the ISO text is the point.
  fromObject(this: protobuf.Type, object: Record<string, unknown>) {
    return this.fromObject(object);
  },
  toObject(message: protobuf.Message & { seconds?: unknown; nanos?: number }) {
    const seconds = BigInt(String(message.seconds ?? 0));
    const nanos = message.nanos ?? 0;
    if (nanos < 0 || nanos >= NANOS) throw new Error('Timestamp nanos out of range');
    return isoOf(seconds * 1_000_000_000n + BigInt(nanos), 1_000_000n, 9) as unknown as Record<string, unknown>;
  },
};

const WELL_KNOWN = [
  'google/protobuf/timestamp.proto',
  'google/protobuf/duration.proto',
  'google/protobuf/wrappers.proto',
  'google/protobuf/struct.proto',
  'google/protobuf/empty.proto',
];

const TO_OBJECT: protobuf.IConversionOptions = { enums: String, defaults: true, arrays: true, objects: true, oneofs: false };

function compileProtobuf(definition: string): CompiledSchema {
  let messages: protobuf.Type[];
  try {
    const root = new protobuf.Root();
    const parsed = protobuf.parse(definition, root, { keepCase: true });
    for (const name of parsed.imports ?? []) {
      const common = protobuf.common.get(name);
      if (!WELL_KNOWN.includes(name) || common === null)
        throw new SchemaCompileError(`the .proto imports ${name}, which is not a well-known type`);
      root.addJSON(common.nested!);
    }
    root.resolveAll();
    // The messages declared at the top of the file, in order: what message indexes count.
    const pkg = parsed.package === undefined ? root : root.lookup(parsed.package);
    messages = (pkg as protobuf.Namespace).nestedArray.filter(
      (n): n is protobuf.Type => n instanceof protobuf.Type && !n.fullName.startsWith('.google.protobuf.'),
    );
  } catch (error) {
    if (error instanceof SchemaCompileError) throw error;
    throw new SchemaCompileError('the Protobuf schema does not parse', { cause: error });
  }
  if (messages.length === 0) throw new SchemaCompileError('the Protobuf schema declares no message');
  return {
    format: 'PROTOBUF',
    decode(body, registry, maxDepth) {
      let type: protobuf.Type;
      let offset = 0;
      if (registry === 'none') {
        type = messages[0]!;
      } else {
        const index = readMessageIndexes(body, registry);
        offset = index.offset;
        let candidates: protobuf.Type[] = messages;
        let found: protobuf.Type | undefined;
        for (const i of index.path) {
          found = candidates[i];
          if (found === undefined) throw new Error(`message index ${index.path.join(',')} names no message of the schema`);
          candidates = found.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type);
        }
        type = found!;
      }
      const message = type.decode(body.subarray(offset));
      return { json: toJsonText(type.toObject(message, TO_OBJECT), maxDepth) };
    },
  };
}

// ---- JSON Schema ------------------------------------------------------------------------

const JSON_SCHEMA: CompiledSchema = {
  format: 'JSON',
  decode: (body) => ({ text: body }),
};

export function compileSchema(schema: SchemaDefinition): CompiledSchema {
  switch (schema.format) {
    case 'AVRO':
      return compileAvro(schema.definition);
    case 'PROTOBUF':
      return compileProtobuf(schema.definition);
    case 'JSON':
      return JSON_SCHEMA;
  }
}
