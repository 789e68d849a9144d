/**
 * How the inbox stores a payload, which the bytes per row in docs/capacity.md and the
 * month table (docs/reaper.md) rest on: a row under TOAST_TUPLE_THRESHOLD (about 2 KB) is stored
 * whole in the heap, its payload uncompressed, whatever the table's toast_tuple_target
 * or the column's storage and compression say. Lowering toast_tuple_target and keeping the
 * payload in the row (STORAGE MAIN) therefore cannot compress a 1 KiB payload; PostgreSQL
 * compresses a payload only in a larger row (pglz by default). These tests fail if a
 * server or a migration ever changes that, so that the capacity figures get measured again.
 */
import { randomBytes } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';

const db = await useTestDatabase();

/** A case event's payload of about `bytes` of JSON: field names and values repeat across its items, as real events' do. */
function casePayload(bytes: number) {
  const items: Record<string, string | number>[] = [];
  const payload = { caseId: `case_${randomBytes(4).toString('hex')}`, acceptedAt: '2026-07-03T09:15:30Z', documents: items };
  while (JSON.stringify(payload).length < bytes) {
    items.push({
      documentId: randomBytes(8).toString('hex'),
      kind: items.length % 2 === 0 ? 'application-form' : 'supporting-evidence',
      receivedAt: '2026-07-03T09:14:02Z',
      pages: items.length + 1,
    });
  }
  return payload;
}

interface Stored {
  text_bytes: number;
  stored_bytes: number;
  compression: string | null;
  toast_bytes: number;
}

async function stored(): Promise<Stored> {
  const [row] = await db.sql<Stored[]>`
    select length(payload::text)::int as text_bytes, pg_column_size(payload)::int as stored_bytes,
           pg_column_compression(payload) as compression,
           (select pg_relation_size(reltoastrelid) from pg_class where oid = 'integration.consumer_inbox'::regclass)::int
             as toast_bytes
    from integration.consumer_inbox`;
  return row!;
}

describe('payload storage in the inbox', () => {
  beforeEach(async () => {
    await db.sql`truncate integration.consumer_inbox`;
    await db.sql`alter table integration.consumer_inbox reset (toast_tuple_target)`;
    await db.sql`alter table integration.consumer_inbox alter column payload set storage extended`;
  });

  it('keeps the payload column as the case inbox design declares it: extended storage, the server default compression', async () => {
    const [column] = await db.sql<{ storage: string; compression: string }[]>`
      select attstorage as storage, attcompression as compression from pg_attribute
      where attrelid = 'integration.consumer_inbox'::regclass and attname = 'payload'`;
    expect(column).toEqual({ storage: 'x', compression: '' });
  });

  it('stores a 1 KiB payload in the row, uncompressed, even with toast_tuple_target at its minimum and storage main', async () => {
    await db.sql`alter table integration.consumer_inbox set (toast_tuple_target = 128)`;
    await db.sql`alter table integration.consumer_inbox alter column payload set storage main`;
    await insertInboxRows(db.sql, [{ status: 'RECEIVED', payload: casePayload(1024) }]);

    const s = await stored();

    expect(s.text_bytes).toBeGreaterThanOrEqual(1024);
    expect(s.compression).toBeNull();
    expect(s.stored_bytes).toBeGreaterThanOrEqual(1000);
    expect(s.toast_bytes).toBe(0);
  });

  it('compresses the same kind of payload in a row over the threshold (the check above can see compression)', async () => {
    await insertInboxRows(db.sql, [{ status: 'RECEIVED', payload: casePayload(4096) }]);

    const s = await stored();

    expect(s.compression).not.toBeNull();
    expect(s.stored_bytes).toBeLessThan(s.text_bytes);
  });
});
