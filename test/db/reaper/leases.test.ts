import { describe, expect, it } from 'vitest';
import { CONSUMERS } from '../../../functions/consumers/index';
import { completeRows } from '../../../functions/inbox/complete';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow, insertInboxRows } from '../../helpers/factories';
import { reap } from './support';
import { releaseExpired } from '../../../functions/inbox/release-expired';
import { analyzedPlans, nodes } from '../../helpers/plans';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();

interface LeaseRow {
  status: string;
  attempt_count: number;
  next_attempt_at: Date | null;
  next_attempt_is_due: boolean;
  locked_by: string | null;
  locked_at: Date | null;
  lease_expires_at: Date | null;
  quarantined_at: Date | null;
  error_code: string | null;
  error_detail: Record<string, unknown> | null;
}

async function row(inboxId: string): Promise<LeaseRow> {
  const [r] = await db.sql<LeaseRow[]>`
    select status, attempt_count, next_attempt_at, next_attempt_at <= now() as next_attempt_is_due,
           locked_by, locked_at, lease_expires_at, quarantined_at, error_code, error_detail
    from integration.consumer_inbox where inbox_id = ${inboxId}`;
  return r!;
}

async function clearInbox(): Promise<void> {
  await db.sql`delete from integration.consumer_inbox`;
}

describe('reaper: expired leases', () => {
  it('returns a stale lease to RETRY_PENDING, due now, and leaves a live one alone', async () => {
    await clearInbox();
    const stale = await insertInboxRow(db.sql, { status: 'PROCESSING', lockedBy: 'crashed', attemptCount: 1, leaseExpiresInSeconds: -5 });
    const live = await insertInboxRow(db.sql, { status: 'PROCESSING', lockedBy: 'alive', attemptCount: 1, leaseExpiresInSeconds: 120 });

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result).toMatchObject({ released: 1, quarantined: 0 });
    expect(await row(stale.inbox_id)).toMatchObject({
      status: 'RETRY_PENDING',
      attempt_count: 1,
      next_attempt_is_due: true,
      locked_by: null,
      locked_at: null,
      lease_expires_at: null,
      error_code: 'STALE_PROCESSING_LOCK',
      error_detail: expect.objectContaining({ staleLockedBy: 'crashed', attempt: 1 }),
    });
    expect(await row(live.inbox_id)).toMatchObject({ status: 'PROCESSING', locked_by: 'alive', error_code: null });
  });

  it("quarantines a stale lease whose attempt was its consumer's last", async () => {
    await clearInbox();
    // case-projection allows 10 attempts (the case inbox design); attempt_count is counted at claim time.
    const last = await insertInboxRow(db.sql, { status: 'PROCESSING', lockedBy: 'crashed', attemptCount: 10, leaseExpiresInSeconds: -1 });
    const notLast = await insertInboxRow(db.sql, { status: 'PROCESSING', lockedBy: 'crashed', attemptCount: 9, leaseExpiresInSeconds: -1 });

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result).toMatchObject({ released: 1, quarantined: 1 });
    const quarantined = await row(last.inbox_id);
    expect(quarantined).toMatchObject({
      status: 'QUARANTINED',
      error_code: 'MAX_ATTEMPTS_EXCEEDED',
      next_attempt_at: null,
      locked_by: null,
      lease_expires_at: null,
    });
    expect(quarantined.quarantined_at).toBeInstanceOf(Date);
    expect(await row(notLast.inbox_id)).toMatchObject({ status: 'RETRY_PENDING', error_code: 'STALE_PROCESSING_LOCK' });
  });

  it('fences the old owner out: a worker whose lease was released completes nothing', async () => {
    await clearInbox();
    const stale = await insertInboxRow(db.sql, { status: 'PROCESSING', lockedBy: 'slow-worker', leaseExpiresInSeconds: -1 });
    await reap(db.as(DatabaseRoles.reaper));
    const before = await row(stale.inbox_id);

    const completed = await completeRows(db.sql, 'slow-worker', [{ inboxId: stale.inbox_id, status: 'PROCESSED' }]);

    expect(completed).toEqual([]);
    expect(await row(stale.inbox_id)).toEqual(before);
    expect(before.status).toBe('RETRY_PENDING');
  });

  it('drains more expired leases than one batch holds, for every consumer', async () => {
    await clearInbox();
    await insertInboxRows(db.sql, [
      ...Array.from({ length: 5 }, () => ({ status: 'PROCESSING' as const, leaseExpiresInSeconds: -1 })),
      ...Array.from({ length: 3 }, () => ({ consumerName: 'case-sla', status: 'PROCESSING' as const, leaseExpiresInSeconds: -1 })),
    ]);

    const result = await reap(db.as(DatabaseRoles.reaper), { config: { reaper: { batchSize: 2, safetyMarginMs: 0 } } });

    expect(result).toMatchObject({ released: 8, complete: true });
    // Every declared consumer, each with its own.
    const released: Record<string, number> = { 'case-projection': 5, 'case-sla': 3 };
    expect(result.consumers.map((c) => [c.consumerName, c.released])).toEqual(CONSUMERS.map((c) => [c.name, released[c.name] ?? 0]));
    const [left] = await db.sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_inbox where status = 'PROCESSING'`;
    expect(left!.n).toBe(0);
  });

  it('skips a row another transaction holds locked instead of waiting for it', async () => {
    await clearInbox();
    const held = await insertInboxRow(db.sql, { status: 'PROCESSING', lockedBy: 'finishing', leaseExpiresInSeconds: -1 });
    const free = await insertInboxRow(db.sql, { status: 'PROCESSING', lockedBy: 'crashed', leaseExpiresInSeconds: -1 });
    const other = db.client({ max: 1 });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = other.begin(async (tx) => {
      await tx`select 1 from integration.consumer_inbox where inbox_id = ${held.inbox_id} for update`;
      locked();
      await released;
    });
    try {
      await isLocked;
      const result = await reap(db.as(DatabaseRoles.reaper));
      expect(result).toMatchObject({ released: 1, complete: true });
      expect((await row(held.inbox_id)).status).toBe('PROCESSING');
      expect((await row(free.inbox_id)).status).toBe('RETRY_PENDING');
    } finally {
      release();
      await holder;
      await other.end();
    }
  });

  it('starts no batch once the invocation is within its safety margin', async () => {
    await clearInbox();
    const stale = await insertInboxRow(db.sql, { status: 'PROCESSING', leaseExpiresInSeconds: -1 });

    const result = await reap(db.as(DatabaseRoles.reaper), {
      remainingMs: () => 5_000,
      config: { reaper: { batchSize: 100, safetyMarginMs: 10_000 } },
    });

    expect(result).toMatchObject({ released: 0, complete: false });
    expect((await row(stale.inbox_id)).status).toBe('PROCESSING');
  });
});

describe('reaper: expired leases under a backlog the statistics have not seen', () => {
  it('reads the in-flight index, never the consumer’s every row or the whole backlog, custom plan or generic', async () => {
    await db.sql`delete from integration.consumer_inbox`;
    await db.sql`delete from integration.consumer_lane`;
    await insertInboxRows(
      db.sql,
      Array.from({ length: 20 }, () => ({})),
    );
    await db.sql`analyze integration.consumer_inbox`;
    await insertInboxRows(db.sql, [
      ...Array.from({ length: 5000 }, () => ({})),
      ...Array.from({ length: 10 }, () => ({ status: 'PROCESSING' as const, leaseExpiresInSeconds: -60 })),
    ]);

    for (const generic of [false, true]) {
      const plans = await analyzedPlans(db, (q) => releaseExpired(q, 'case-projection', 10, 1000), { role: DatabaseRoles.reaper, generic });
      const indexes = plans
        .flatMap(nodes)
        .map((n) => n['Index Name'])
        .filter((i) => i !== undefined);
      expect(indexes, `generic plan: ${generic}`).toContain('consumer_inbox_in_flight_lane_idx');
      expect(indexes, `generic plan: ${generic}`).not.toContain('consumer_inbox_unique_event_per_consumer_uk');
      expect(indexes, `generic plan: ${generic}`).not.toContain('consumer_inbox_open_lane_idx');
    }
  });
});
