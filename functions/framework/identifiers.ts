/**
 * How long an identifier may be: an envelope's event id, aggregate type and aggregate id, and
 * a payload's id that a handler writes into a unique key (a case id), in UTF-8 bytes.
 *
 * PostgreSQL refuses a B-tree index entry longer than about a third of a page (2,704 bytes
 * with 8 KiB pages; SQLSTATE 54000), and that depends on every column of the entry. The
 * widest keys built from these ids are the lanes' (consumer, aggregate type, aggregate id)
 * and the case audit's (consumer, event id, change, case id): with each id at most 512 bytes
 * they stay far below it. An id that fits the inbox's own key but not a later one would
 * otherwise fail in the worker, every attempt, holding its aggregate (docs/ingest.md, "Ids").
 */
import { z } from 'zod';

export const MAX_ID_BYTES = 512;

/** The UTF-8 length of `value` when it is over MAX_ID_BYTES, else null. */
export function idBytesOver(value: string): number | null {
  // A UTF-16 unit is at most 3 bytes of UTF-8: short strings need no count.
  if (value.length * 3 <= MAX_ID_BYTES) return null;
  const bytes = Buffer.byteLength(value, 'utf8');
  return bytes > MAX_ID_BYTES ? bytes : null;
}

/** A payload's identifier that a handler writes into a unique key: non-empty, at most MAX_ID_BYTES. */
export const identifier = z
  .string()
  .min(1)
  .refine((v) => idBytesOver(v) === null, { message: `at most ${MAX_ID_BYTES} bytes of UTF-8` });
