/**
 * Protobuf writer schemas (protobufjs), loaded by writer-schema.ts when a consumer's first
 * Protobuf schema is compiled: field names as the .proto declares them; every field present
 * (proto3 defaults included); enums → their names; int64/uint64/fixed64 → exact integers;
 * bytes → base64; maps → objects; google.protobuf.Timestamp → ISO-8601 UTC text
 * (nanoseconds kept).
 *
 * A .proto may import another: a well-known type (protobufjs carries them), or a file
 * another subject holds (a Confluent schema reference, named by the import's path). The
 * references are parsed first into the same root, each before the files that import it; an
 * import that is neither fails the compilation.
 */
import protobuf from 'protobufjs';
import { isoOf } from './epoch-text';
import { readMessageIndexes } from './framing';
import { toJsonText } from '../../ingest/json-text';
import { referencesInOrder, SchemaCompileError, type CompiledSchema, type SchemaDefinition } from './writer-schema';

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

/** One root for a schema and its references: each file parsed once, its imports satisfied. */
class ProtoFiles {
  readonly root = new protobuf.Root();
  private readonly present = new Set<string>();

  /** Parses a file into the root; `provided` are the files it may import besides the well-known ones. */
  add(definition: string, provided: ReadonlySet<string>): void {
    const parsed = protobuf.parse(definition, this.root, { keepCase: true });
    for (const name of parsed.imports ?? []) {
      if (provided.has(name) || this.present.has(name)) continue;
      const common = protobuf.common.get(name);
      if (!WELL_KNOWN.includes(name) || common === null)
        throw new SchemaCompileError(`the .proto imports ${name}, which is neither a well-known type nor a schema reference`);
      this.root.addJSON(common.nested!);
      this.present.add(name);
    }
  }

  markPresent(name: string): void {
    this.present.add(name);
  }
}

/**
 * The messages declared at the top of the schema's own file, in order: what message indexes
 * count. Read from the file parsed alone, since its references may share its package.
 */
function topLevelMessageNames(definition: string): string[] {
  const parsed = protobuf.parse(definition, new protobuf.Root(), { keepCase: true });
  const pkg = parsed.package === undefined ? parsed.root : parsed.root.lookup(parsed.package);
  return (pkg as protobuf.Namespace).nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type).map((n) => n.fullName);
}

function parseProtobuf(schema: SchemaDefinition): protobuf.Type[] {
  const files = new ProtoFiles();
  const references = referencesInOrder(schema);
  const provided = new Set(references.map((r) => r.name));
  for (const reference of references) {
    if (reference.schema.format !== 'PROTOBUF')
      throw new SchemaCompileError(`the .proto imports ${reference.name}, a ${reference.schema.format} schema`);
    // A registry may hold a well-known type as a subject too: protobufjs's own copy serves.
    if (WELL_KNOWN.includes(reference.name)) continue;
    files.add(reference.schema.definition, provided);
    files.markPresent(reference.name);
  }
  files.add(schema.definition, provided);
  files.root.resolveAll();
  return topLevelMessageNames(schema.definition).map((name) => files.root.lookupType(name));
}

export function compileProtobuf(schema: SchemaDefinition): CompiledSchema {
  let messages: protobuf.Type[];
  try {
    messages = parseProtobuf(schema);
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
