/**
 * The inbox keeps room on its pages (fillfactor 60, migration 0111) so that a completion's
 * new row version can stay on the page of the claimed one, and a finished row keeps the
 * lease columns that follow the payload (complete.ts): PostgreSQL then logs the completion
 * without the payload (`npm run bench -- wal --by-type` shows it). Both choices are pinned
 * here. Whether a version stays also depends on the page being pruned of the versions the
 * claim left dead, which a long transaction anywhere in the database holds back, so the
 * placement itself is the benchmark's to show, not a test's.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { claimDue } from '../../../functions/inbox/claim-due';
import { completeRows } from '../../../functions/inbox/complete';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { newOwnerId } from '../../../functions/worker/run-worker';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';

const db = await useTestDatabase();

/** A 1 KiB payload of random text, as the WAL benchmark's: nothing for TOAST to compress. */
const kibPayload = () => ({ caseId: `case_${randomBytes(4).toString('hex')}`, note: randomBytes(760).toString('base64') });

interface Version {
  inbox_id: string;
  page: number;
  lease_expires_at: Date | null;
  updated_at: Date;
}

async function versions(): Promise<Version[]> {
  return db.sql<Version[]>`
    select inbox_id, (ctid::text::point)[0]::int as page, lease_expires_at, updated_at
    from integration.consumer_inbox order by inbox_id`;
}

describe('room on inbox pages for the completion', () => {
  it('the inbox table is created with fillfactor 60', async () => {
    const [t] = await db.sql<{ reloptions: string[] }[]>`
      select reloptions from pg_class where oid = 'integration.consumer_inbox'::regclass`;
    expect(t!.reloptions).toContain('fillfactor=60');
  });

  it('leaves room on each page: rows with a 1 KiB payload go in three to a page', async () => {
    await db.sql`truncate integration.consumer_inbox`;
    await insertInboxRows(
      db.sql,
      Array.from({ length: 12 }, () => ({ status: 'RECEIVED' as const, payload: kibPayload() })),
    );

    const perPage = await db.sql<{ rows: number }[]>`
      select count(*)::int as rows from integration.consumer_inbox group by (ctid::text::point)[0]`;

    expect(Math.max(...perPage.map((p) => p.rows))).toBeLessThanOrEqual(3);
  });

  it('a completion leaves the lease columns that follow the payload as the claim set them', async () => {
    await db.sql`truncate integration.consumer_inbox`;
    await insertInboxRows(
      db.sql,
      Array.from({ length: 12 }, () => ({ status: 'RECEIVED' as const, payload: kibPayload() })),
    );
    const worker = db.as(workerRoleOf(caseProjection));
    const owner = newOwnerId('page-room');
    const claim = await claimDue(worker, { consumerName: 'case-projection', owner, limit: 12, leaseSeconds: 60 });
    expect(claim.rows).toHaveLength(12);
    const claimed = await versions();

    const done = await completeRows(
      worker,
      owner,
      claim.rows.map((r, i) => ({ inboxId: r.inbox_id, status: i % 2 === 0 ? ('PROCESSED' as const) : ('IGNORED' as const) })),
    );

    expect(done).toHaveLength(12);
    const finished = await versions();
    expect(finished.map((v) => [v.lease_expires_at, v.updated_at])).toEqual(claimed.map((v) => [v.lease_expires_at, v.updated_at]));
    expect(claimed.every((v) => v.lease_expires_at !== null)).toBe(true);
    const [statuses] = await db.sql<{ finished: number; locked: number }[]>`
      select count(*) filter (where status in ('PROCESSED', 'IGNORED') and processed_at is not null)::int as finished,
             count(*) filter (where locked_by is not null or locked_at is not null)::int as locked
      from integration.consumer_inbox`;
    expect(statuses).toEqual({ finished: 12, locked: 0 });
  });
});
