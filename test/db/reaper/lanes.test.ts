/**
 * Lanes through the reaper: a lease it releases makes its lane due again (or, on a last
 * attempt under hold-aggregate, holds it); due rows without a lane get one.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { claimDue } from '../../../functions/inbox/claim-due';
import { DatabaseRoles } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { work } from '../worker/support';
import { reap } from './support';

const db = await useTestDatabase();
const sql = db.sql;
const asWorker = db.as(DatabaseRoles.worker);
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
});
