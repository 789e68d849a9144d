/**
 * The reaper keeps lanes right where a writer went around them: a lease it releases hands
 * the lane back; a lane held with nothing in flight for longer than any invocation runs is
 * freed; due rows without a lane get one. Each time the worker then claims the rows.
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
  const [row] = await sql<{ locked_by: string | null; due: boolean | null }[]>`
    select locked_by, due_at <= now() as due from integration.consumer_lane where aggregate_id = ${aggregateId}`;
  return row;
}

describe('reaper: lanes', () => {
  it('an expired lease hands its lane back with its rows, due now', async () => {
    await insertInboxRows(sql, [accepted('case_crashed')]);
    // A worker claims and dies before its batch: its lease runs out.
    const claim = await claimDue(asWorker, { consumerName: 'case-projection', owner: 'dead-worker', limit: 10, leaseSeconds: 0.05 });
    expect(claim.rows).toHaveLength(1);
    expect(await lane('case_crashed')).toEqual({ locked_by: 'dead-worker', due: null });
    await new Promise((r) => setTimeout(r, 100));

    expect(await reap(asReaper)).toMatchObject({ released: 1 });

    expect(await lane('case_crashed')).toEqual({ locked_by: null, due: true });
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 1, processed: 1 });
  });

  it('frees a lane held past any invocation with no row in flight under its owner', async () => {
    await insertInboxRows(sql, [accepted('case_abandoned'), accepted('case_recent')]);
    // Held by owners whose rows some writer moved back without releasing the lanes.
    await sql`update integration.consumer_lane set locked_by = 'gone', locked_at = now() - interval '20 minutes', due_at = null where aggregate_id = 'case_abandoned'`;
    await sql`update integration.consumer_lane set locked_by = 'gone', locked_at = now() - interval '1 minute', due_at = null where aggregate_id = 'case_recent'`;

    await reap(asReaper);

    expect(await lane('case_abandoned')).toEqual({ locked_by: null, due: true });
    expect(await lane('case_recent')).toMatchObject({ locked_by: 'gone' });
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 1, processed: 1 });
  });

  it('gives a lane to due rows that have none', async () => {
    await insertInboxRows(sql, [accepted('case_orphan')]);
    await sql`delete from integration.consumer_lane`;
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 0 });

    await reap(asReaper);

    expect(await lane('case_orphan')).toEqual({ locked_by: null, due: true });
    expect(await work(asWorker, caseProjection)).toMatchObject({ claimed: 1, processed: 1 });
  });
});
