/**
 * Protobuf writer schemas (protobufjs), loaded by writer-schema.ts when a consumer's first
 * Protobuf schema is compiled: field names as the .proto declares them; every field present
 * (proto3 defaults included); enums → their names; int64/uint64/fixed64 → exact integers;
 * bytes → base64; maps → objects; google.protobuf.Timestamp → ISO-8601 UTC text
 * (nanoseconds kept).
 */
import protobuf from 'protobufjs';
import { isoOf } from './epoch-text';
import { readMessageIndexes } from './framing';
import { toJsonText } from './json-text';
import { SchemaCompileError, type CompiledSchema, type SchemaDefinition } from './writer-schema';

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

export function compileProtobuf(schema: SchemaDefinition): CompiledSchema {
  let messages: protobuf.Type[];
  try {
    const root = new protobuf.Root();
    const parsed = protobuf.parse(schema.definition, root, { keepCase: true });
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
