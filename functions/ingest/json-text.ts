/**
 * Walks over a record's value, each one iterative (an explicit stack, never recursion): a
 * value's nesting comes from the producer, and a recursive walk overflows the stack on a
 * deep enough value, which would turn the record's real reason into a crash.
 *
 *   jsonDepth        the deepest nesting of JSON text, read from the text before parsing;
 *   findUnstorable   the first string or member name PostgreSQL's jsonb would refuse;
 *   toJsonText       a decoded Avro or Protobuf value as JSON text, integers exact.
 */
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The deepest nesting of objects and arrays in UTF-8 JSON `bytes`, counted up to `stopAt`
 * (the scan stops there: the answer is then "too deep", whatever follows). Brackets inside
 * strings do not count. Read from the bytes, before any other check, so that a value too
 * deep is that whatever else it holds (UTF-8 multi-byte sequences never contain an ASCII
 * byte). Bytes that are not JSON get some number; later steps judge them.
 */
export function jsonDepth(text: Uint8Array, stopAt: number): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === QUOTE) {
      // Skip the string natively: its closing quote is the next one not escaped, i.e. not
      // preceded by an odd run of backslashes. Most of a value's bytes are inside strings.
      let end = text.indexOf(QUOTE, i + 1);
      while (end !== -1) {
        let backslashes = 0;
        while (text[end - 1 - backslashes] === BACKSLASH) backslashes++;
        if (backslashes % 2 === 0) break;
        end = text.indexOf(QUOTE, end + 1);
      }
      if (end === -1) return deepest;
      i = end;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest >= stopAt) return deepest;
      }
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--;
    }
  }
  return deepest;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text PostgreSQL stores as it is: no NUL, no unpaired surrogate. */
export function isStorableText(s: string): boolean {
  return !s.includes('\u0000') && !LONE_SURROGATE.test(s);
}

/** The path of the first string or member name PostgreSQL would refuse, or null. Depth-first, in document order. */
export function findUnstorable(root: unknown): string | null {
  const stack: Array<{ value: unknown; path: string }> = [{ value: root, path: '' }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value === 'string') {
      if (!isStorableText(value)) return path || '(value)';
      continue;
    }
    if (typeof value !== 'object' || value === null) continue;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], path: `${path}[${i}]` });
      continue;
    }
    const entries = Object.entries(value);
    for (const [name] of entries) {
      if (!isStorableText(name)) return `${path ? `${path}.` : ''}<name> (member name)`;
    }
    for (let i = entries.length - 1; i >= 0; i--) {
      const [name, member] = entries[i]!;
      stack.push({ value: member, path: path ? `${path}.${name}` : name });
    }
  }
  return null;
}

export class ValueTooDeepError extends Error {
  constructor(readonly limit: number) {
    super(`value nests deeper than ${limit} levels`);
    this.name = 'ValueTooDeepError';
  }
}

type Frame =
  { kind: 'array'; items: readonly unknown[]; next: number } | { kind: 'object'; entries: Array<[string, unknown]>; next: number };

/**
 * One scalar as JSON text, or null when `value` is an object or array to open.
 *   bigint, protobufjs Long  the exact digits (a JSON number PostgreSQL keeps exact);
 *   bytes (Uint8Array)       base64 text;
 *   NaN, ±Infinity           the strings "NaN", "Infinity", "-Infinity" (JSON has no such numbers);
 *   undefined                null.
 */
function scalar(value: unknown): string | null {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : JSON.stringify(String(value));
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return 'null';
    case 'object':
      if (value === null) return 'null';
      if (value instanceof Uint8Array)
        return JSON.stringify(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64'));
      if (isLong(value)) return String(value);
      return null;
    default:
      return 'null';
  }
}

/**
 * A protobufjs 64-bit integer (the `long` package's Long), recognised as `Long.isLong` does,
 * by its marker: the JSON walk serves every value, and must not load protobufjs to do it.
 */
function isLong(value: object): boolean {
  return (value as { __isLong__?: unknown }).__isLong__ === true;
}

function open(value: object): Frame {
  if (Array.isArray(value)) return { kind: 'array', items: value, next: 0 };
  if (value instanceof Map) return { kind: 'object', entries: [...value.entries()].map(([k, v]) => [String(k), v]), next: 0 };
  return { kind: 'object', entries: Object.entries(value), next: 0 };
}

/**
 * A decoded value as JSON text. Member order is the object's own (the schema's field order).
 * Throws ValueTooDeepError past `maxDepth` levels (a recursive schema can nest without end).
 */
export function toJsonText(root: unknown, maxDepth: number): string {
  const top = scalar(root);
  if (top !== null) return top;
  const out: string[] = [];
  const stack: Frame[] = [];
  const push = (value: object) => {
    if (stack.length >= maxDepth) throw new ValueTooDeepError(maxDepth);
    const frame = open(value);
    out.push(frame.kind === 'array' ? '[' : '{');
    stack.push(frame);
  };
  push(root as object);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    let child: unknown;
    if (frame.kind === 'array') {
      if (frame.next === frame.items.length) {
        out.push(']');
        stack.pop();
        continue;
      }
      if (frame.next > 0) out.push(',');
      child = frame.items[frame.next++];
    } else {
      if (frame.next === frame.entries.length) {
        out.push('}');
        stack.pop();
        continue;
      }
      const [name, member] = frame.entries[frame.next]!;
      out.push(`${frame.next > 0 ? ',' : ''}${JSON.stringify(name)}:`);
      frame.next++;
      child = member;
    }
    const text = scalar(child);
    if (text !== null) out.push(text);
    else push(child as object);
  }
  return out.join('');
}
