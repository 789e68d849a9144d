/**
 * Opaque page cursors: base64url of {at, id}. Opaque so that nobody builds one by hand
 * from a rounded timestamp (JavaScript dates lose PostgreSQL's microseconds).
 */
import { OpsError, OpsErrorCodes } from './errors';

export function encodeCursor(cursor: { at: string; id: string } | null): string | null {
  return cursor === null ? null : Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): { at: string; id: string } | undefined {
  if (cursor === undefined) return undefined;
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (
      typeof v === 'object' &&
      v !== null &&
      typeof (v as { at?: unknown }).at === 'string' &&
      !Number.isNaN(Date.parse((v as { at: string }).at)) &&
      typeof (v as { id?: unknown }).id === 'string' &&
      /^[0-9a-f-]{36}$/i.test((v as { id: string }).id)
    ) {
      return { at: (v as { at: string }).at, id: (v as { id: string }).id };
    }
  } catch {
    // fall through
  }
  throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'cursor: not a cursor returned by a previous page');
}

/** A keyset page as a command returns it: the rows, and the cursor of the next page (null on the last). */
export function pageOf<R>(page: { rows: R[]; next: { at: string; id: string } | null }): { rows: R[]; nextCursor: string | null } {
  return { rows: page.rows, nextCursor: encodeCursor(page.next) };
}
