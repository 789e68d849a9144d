import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { useTestDatabase } from '../../helpers/db';
import { caseAcceptedPayload, insertInboxRow, type InboxRowSpec } from '../../helpers/factories';
import { work } from '../worker/support';
import { allInboxRows, auditRows, inboxRowOf, opsDeps, opsError, quarantinedRow, run } from './support';

const db = await useTestDatabase();
const deps = opsDeps(db.sql);

beforeEach(async () => {
  await db.sql`truncate integration.consumer_inbox, integration.operator_audit, read_model.case_summary`;
});

const quarantined = (spec: InboxRowSpec = {}) => quarantinedRow(db.sql, { attemptCount: 3, ...spec });
const rowOf = (inboxId: string) => inboxRowOf(db.sql, inboxId);
const audits = () => auditRows(db.sql);

describe('resolve', () => {
  it('marks the row IGNORED with OPERATOR_RESOLVED, keeping why it was quarantined, and leaves others alone', async () => {
    const target = await quarantined();
    const other = await quarantined();
    await db.sql`update integration.consumer_inbox set error_message = 'caseId: expected string', error_detail = '{"path": ["caseId"]}'`;
    const before = await rowOf(target.inbox_id);
    const otherBefore = await rowOf(other.inbox_id);

    const result = await run(deps, { command: 'resolve', ids: [target.inbox_id], reason: 'producer bug PRJ-9, never to be applied' });

    expect(result).toMatchObject({ dryRun: false, resolved: 1, remaining: 0, skipped: [] });
    const row = await rowOf(target.inbox_id);
    expect(row).toMatchObject({
      status: 'IGNORED',
      error_code: 'OPERATOR_RESOLVED',
      error_message: 'resolved by alice: producer bug PRJ-9, never to be applied',
      error_detail: {
        resolvedBy: 'alice',
        reason: 'producer bug PRJ-9, never to be applied',
        quarantineErrorCode: 'PAYLOAD_INVALID',
        quarantineErrorMessage: 'caseId: expected string',
        quarantineErrorDetail: { path: ['caseId'] },
      },
      attempt_count: 3,
      quarantined_at: before.quarantined_at,
      next_attempt_at: null,
      locked_by: null,
    });
    expect(row.processed_at).toBeInstanceOf(Date);
    expect(await rowOf(other.inbox_id)).toEqual(otherBefore);
  });

  it('records who, why, what and how many in an audit row', async () => {
    const a = await quarantined({ errorCode: 'AGGREGATE_VERSION_GAP' });
    const b = await quarantined({ errorCode: 'AGGREGATE_VERSION_GAP' });

    const result = await run(deps, {
      command: 'resolve',
      consumer: 'case-projection',
      errorCode: 'AGGREGATE_VERSION_GAP',
      reason: 'gap accepted',
    });

    const [audit, ...more] = await audits();
    expect(more).toHaveLength(0);
    expect(audit).toMatchObject({
      audit_id: result.auditId,
      action: 'resolve',
      actor: 'alice',
      reason: 'gap accepted',
      source: 'cli',
      dry_run: false,
      consumer_names: ['case-projection'],
      request: { selection: { consumerName: 'case-projection', errorCode: 'AGGREGATE_VERSION_GAP' }, limit: 1000 },
      affected_count: 2,
      outcome: { priorErrorCodes: { AGGREGATE_VERSION_GAP: 2 } },
    });
    expect([...(audit!.inbox_ids as string[])].sort()).toEqual([a.inbox_id, b.inbox_id].sort());
  });

  it('never runs the handler: the worker finds nothing to claim and writes no side effect', async () => {
    const row = await quarantined({ payload: caseAcceptedPayload('case_resolved') });

    await run(deps, { command: 'resolve', ids: [row.inbox_id], reason: 'not to be applied' });
    const worked = await work(db.sql, caseProjection);

    expect(worked).toMatchObject({ claimed: 0 });
    expect(await db.sql`select * from read_model.case_summary`).toEqual([]);
    expect((await rowOf(row.inbox_id)).status).toBe('IGNORED');
  });

  it('on a dry run, shows which rows it would take, changes nothing and records a dry run', async () => {
    const row = await quarantined();
    const before = await allInboxRows(db.sql);

    const result = await run(deps, { command: 'resolve', ids: [row.inbox_id], dryRun: true });

    expect(result).toMatchObject({ dryRun: true, matched: 1, wouldResolve: 1 });
    expect(await allInboxRows(db.sql)).toEqual(before);
    const [audit] = await audits();
    expect(audit).toMatchObject({ action: 'resolve', dry_run: true, affected_count: 1, inbox_ids: [row.inbox_id] });
  });

  it('refuses without a reason or an actor, and names the ids that are not QUARANTINED', async () => {
    const row = await quarantined();
    const processed = await insertInboxRow(db.sql, { status: 'PROCESSED' });

    await opsError(run(deps, { command: 'resolve', ids: [row.inbox_id] }), 'REASON_REQUIRED');
    await opsError(run(deps, { command: 'resolve', ids: [row.inbox_id], reason: 'x' }, { source: 'lambda' }), 'ACTOR_REQUIRED');
    const error = await opsError(run(deps, { command: 'resolve', ids: [processed.inbox_id], reason: 'x' }), 'NO_ROWS_MATCH');

    expect(error.details).toMatchObject({ skipped: [{ inboxId: processed.inbox_id, reason: 'status is PROCESSED, not QUARANTINED' }] });
    expect((await rowOf(row.inbox_id)).status).toBe('QUARANTINED');
    expect(await audits()).toHaveLength(0);
  });
});
