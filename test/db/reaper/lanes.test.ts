/**
 * Lanes through the reaper: a lease it releases makes its lane due again (or, on a last
 * attempt under hold-aggregate, holds it); due rows without a lane get one.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { claimDue } from '../../../functions/inbox/claim-due';
import { DatabaseRoles, workerRoleOf } from '../../../functions/lib/database-roles';
import type { Sql } from '../../../functions/lib/db';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { analyzedPlans, rowsVisited } from '../../helpers/plans';
import { adoptOrphans } from '../../../functions/inbox/adopt-orphans';
import { work } from '../worker/support';
import { reap } from './support';

const db = await useTestDatabase();
const sql = db.sql;
const asWorker = db.as(workerRoleOf(caseProjection));
const asReaper = db.as(DatabaseRoles.reaper);

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary`;
});

const accepted = (caseId: string) => ({ aggregateId: caseId, payload: { caseId, acceptedAt: '2026-07-03T09:15:30Z' } });

async function lane(aggregateId: string) {
  const [row] = await sql<{ held_by: string | null; due: boolean | null }[]>`
    select held_by, due_at <= now() as due from integration.consumer_lane where aggregate_id = ${aggregateId}`;
  return row;
}

describe('reaper: lanes', () => {
  it('an expired lease makes its lane due again with its rows', async () => {
    await insertInboxRows(sql, [accepted('case_crashed'), { ...accepted('case_crashed'), receivedSecondsAgo: -1 }]);
    // A worker claims a run and dies before its batch: its lease runs out.
    const claim = await claimDue(asWorker, { consumerName: 'case-projection', owner: 'dead-worker', limit: 1, leaseSeconds: 0.05 });
    expect(claim.rows).toHaveLength(1);
    // The row behind the one in flight waits: its lane is not due.
    expect(await lane('case_crashed')).toEqual({ held_by: null, due: null });
    await new Promise((r) => setTimeout(r, 100));
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 0 });

    expect(await reap(asReaper)).toMatchObject({ released: 1 });

    expect(await lane('case_crashed')).toEqual({ held_by: null, due: true });
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 2, processed: 2 });
  });

  it('under hold-aggregate, an expired lease on the last attempt quarantines its row and holds the rest', async () => {
    await insertInboxRows(sql, [
      { ...accepted('case_last'), attemptCount: caseProjection.retry.maxAttempts - 1 },
      { ...accepted('case_last'), receivedSecondsAgo: -1 },
    ]);
    const claim = await claimDue(asWorker, { consumerName: 'case-projection', owner: 'dead-worker', limit: 1, leaseSeconds: 0.05 });
    await new Promise((r) => setTimeout(r, 100));

    expect(await reap(asReaper)).toMatchObject({ quarantined: 1 });

    expect(await lane('case_last')).toMatchObject({ held_by: claim.rows[0]!.inbox_id });
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 0 });
  });

  it('gives a lane to due rows that have none', async () => {
    await insertInboxRows(sql, [accepted('case_orphan')]);
    await sql`delete from integration.consumer_lane`;
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 0 });

    await reap(asReaper);

    expect(await lane('case_orphan')).toEqual({ held_by: null, due: true });
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 1, processed: 1 });
  });

  /** Hold `statements` open in a transaction of another session while `during` runs. */
  async function whileHeld(statements: (tx: Sql) => Promise<unknown>, during: () => Promise<number>) {
    const holder = db.client({ max: 1 });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let holding!: () => void;
    const held = new Promise<void>((r) => (holding = r));
    const tx = holder.begin(async (t) => {
      await statements(t as unknown as Sql);
      holding();
      await released;
    });
    try {
      await held;
      const adopting = during();
      const waited = await Promise.race([adopting.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 500))]);
      release();
      await tx;
      return { waited, adopted: await adopting };
    } finally {
      release();
      await holder.end();
    }
  }

  it('a claim in progress (rows to PROCESSING, lane deleted): nothing adopted, and no wait for it', async () => {
    await insertInboxRows(sql, [accepted('case_claimed')]);

    const result = await whileHeld(
      async (t) => {
        await t`update integration.consumer_inbox set status = 'PROCESSING', locked_by = 'w', locked_at = now(),
                  lease_expires_at = now() + interval '1 minute', attempt_count = 1 where aggregate_id = 'case_claimed'`;
        await t`delete from integration.consumer_lane where aggregate_id = 'case_claimed'`;
      },
      () => adoptOrphans(asReaper, 'case-projection', 100),
    );

    expect(result).toEqual({ waited: false, adopted: 0 });
    expect(await lane('case_claimed')).toBeUndefined();
  });

  it('a lane being written by another transaction (a worker waking it): no wait, nothing adopted', async () => {
    await insertInboxRows(sql, [accepted('case_woken')]);

    const result = await whileHeld(
      (t) => t`update integration.consumer_lane set due_at = now(), updated_at = now() where aggregate_id = 'case_woken'`,
      () => adoptOrphans(asReaper, 'case-projection', 100),
    );

    expect(result).toEqual({ waited: false, adopted: 0 });
  });

  it('leaves the lanes that exist as they are, and looks each one up by its key whatever the statistics', async () => {
    // Statistics taken while a few rows were due, then a backlog of 3,000 aggregates, each
    // with its lane (as the triggers leave them), and one orphan.
    await sql`delete from integration.consumer_lane`;
    await insertInboxRows(
      sql,
      Array.from({ length: 20 }, (_, n) => accepted(`case_early_${n}`)),
    );
    await sql`analyze integration.consumer_inbox`;
    await sql`analyze integration.consumer_lane`;
    await insertInboxRows(
      sql,
      Array.from({ length: 3000 }, (_, n) => accepted(`case_backlog_${n}`)),
    );
    await insertInboxRows(sql, [{ ...accepted('case_orphan'), receivedSecondsAgo: 60 }]);
    await sql`delete from integration.consumer_lane where aggregate_id = 'case_orphan'`;
    const before = await sql`select aggregate_id, updated_at from integration.consumer_lane order by aggregate_id`;

    expect(await adoptOrphans(asReaper, 'case-projection', 1000)).toBe(1);

    const after =
      await sql`select aggregate_id, updated_at from integration.consumer_lane where aggregate_id <> 'case_orphan' order by aggregate_id`;
    expect(after).toEqual(before);
    expect(await lane('case_orphan')).toEqual({ held_by: null, due: true });
    // 1,000 rows read and 1,000 keys probed: a few rows visited per row read, custom plan or
    // generic. (A local run's reaper, checking for a lane with NOT EXISTS, was seen joining
    // every row read to all the consumer's lanes: 200,000 comparisons for 10,000 lanes.)
    for (const generic of [false, true]) {
      const [plan] = await analyzedPlans(db, (q) => adoptOrphans(q, 'case-projection', 1000), { role: DatabaseRoles.reaper, generic });
      expect(rowsVisited(plan!), `generic plan: ${generic}`).toBeLessThan(20 * 1000);
    }
  });
});
