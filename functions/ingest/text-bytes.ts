/**
 * Bytes ↔ text, strictly: Node is lenient by default (Buffer.from(s, 'base64') skips
 * characters that are not base64, Buffer#toString('utf8') replaces invalid bytes with
 * U+FFFD), and either would store something the producer never sent.
 */

/** UTF-8 that throws on an invalid byte instead of replacing it. */
export const utf8 = new TextDecoder('utf-8', { fatal: true });

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The bytes of strict base64 as the ESM writes it (standard alphabet, padded, canonical),
 * or null. Checked by round trip: Node's decoder skips what it does not understand and
 * accepts the URL-safe alphabet, so only re-encoding to the same text proves the decoding
 * lost nothing. Cheaper than a pattern over the whole value, too.
 */
export function decodeBase64(s: string): Buffer | null {
  const bytes = Buffer.from(s, 'base64');
  return bytes.toString('base64') === s ? bytes : null;
}

/** Bytes as text when they are valid UTF-8 that PostgreSQL can store, else null. */
export function storableUtf8(bytes: Uint8Array): string | null {
  try {
    const s = utf8.decode(bytes);
    return s.includes('\u0000') ? null : s;
  } catch {
    return null;
  }
}

/** Text or base64, whichever keeps the bytes exactly. `base64` is the ESM's own encoding of them. */
export function encodeBytes(bytes: Uint8Array, base64: string): { text: string; encoding: 'utf8' | 'base64' } {
  const s = storableUtf8(bytes);
  return s === null ? { text: base64, encoding: 'base64' } : { text: s, encoding: 'utf8' };
}

/** Text PostgreSQL can store: NUL and unpaired surrogates replaced with U+FFFD. */
export function replaceUnstorable(s: string): string {
  return s.replace(/\u0000/g, '\uFFFD').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
}
