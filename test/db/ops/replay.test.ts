import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { useTestDatabase } from '../../helpers/db';
import { caseAcceptedPayload, insertInboxRow, insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { work } from '../worker/support';
import { allInboxRows, auditRows, inboxRowOf, opsDeps, opsError, quarantinedRow, run } from './support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const deps = opsDeps(db.as(DatabaseRoles.ops));

beforeEach(async () => {
  await db.sql`truncate integration.consumer_inbox, integration.operator_audit, read_model.case_summary`;
});

const quarantined = (spec: InboxRowSpec = {}) => quarantinedRow(db.sql, spec);
const rowOf = (inboxId: string) => inboxRowOf(db.sql, inboxId);
const audits = () => auditRows(db.sql);

describe('replay by inbox id', () => {
  it('moves the row to RETRY_PENDING due now with its error cleared and a fresh attempt budget, and leaves others alone', async () => {
    const target = await quarantined({ errorCode: 'MAX_ATTEMPTS_EXCEEDED', attemptCount: 10 });
    const other = await quarantined();
    await db.sql`update integration.consumer_inbox set error_message = 'boom', error_detail = '{"attempt": 10}'`;
    const otherBefore = await rowOf(other.inbox_id);

    const result = await run(deps, { command: 'replay', ids: [target.inbox_id], reason: 'handler fixed in v42' });

    expect(result).toMatchObject({ dryRun: false, replayed: 1, remaining: 0, skipped: [] });
    const row = await rowOf(target.inbox_id);
    expect(row).toMatchObject({
      status: 'RETRY_PENDING',
      attempt_count: 0,
      quarantined_at: null,
      error_code: null,
      error_message: null,
      error_detail: null,
      locked_by: null,
    });
    const [check] =
      await db.sql`select next_attempt_at <= now() as due from integration.consumer_inbox where inbox_id = ${target.inbox_id}`;
    expect(check).toEqual({ due: true });
    expect(await rowOf(other.inbox_id)).toEqual(otherBefore);
  });

  it('records who, why, what and how many in an audit row committed with the update', async () => {
    const a = await quarantined({ errorCode: 'MAX_ATTEMPTS_EXCEEDED' });
    const b = await quarantined({ errorCode: 'PAYLOAD_INVALID', consumerName: 'case-sla' });

    const result = await run(deps, { command: 'replay', ids: [a.inbox_id, b.inbox_id], reason: 'INC-123 fixed' });

    const [audit, ...more] = await audits();
    expect(more).toHaveLength(0);
    expect(audit).toMatchObject({
      audit_id: result.auditId,
      action: 'replay',
      actor: 'alice',
      reason: 'INC-123 fixed',
      source: 'cli',
      dry_run: false,
      consumer_names: ['case-projection', 'case-sla'],
      request: { selection: { inboxIds: [a.inbox_id, b.inbox_id] }, limit: 1000 },
      affected_count: 2,
      outcome: { priorErrorCodes: { MAX_ATTEMPTS_EXCEEDED: 1, PAYLOAD_INVALID: 1 } },
    });
    expect([...(audit!.inbox_ids as string[])].sort()).toEqual([a.inbox_id, b.inbox_id].sort());
  });

  it('reports the ids it skipped and why', async () => {
    const target = await quarantined();
    const processed = await insertInboxRow(db.sql, { status: 'PROCESSED' });
    const missing = '00000000-0000-4000-8000-000000000000';

    const result = await run(deps, {
      command: 'replay',
      ids: [target.inbox_id, processed.inbox_id, missing],
      reason: 'retry',
    });

    expect(result.replayed).toBe(1);
    expect(result.skipped).toEqual([
      { inboxId: processed.inbox_id, reason: 'status is PROCESSED, not QUARANTINED' },
      { inboxId: missing, reason: 'no such inbox row' },
    ]);
    expect((await rowOf(processed.inbox_id)).status).toBe('PROCESSED');
  });
});

describe('replay by filter', () => {
  it('takes only the consumer, error code, event type and quarantine time range asked for', async () => {
    const [match, wrongCode, wrongType, wrongConsumer, tooOld] = await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
      { status: 'QUARANTINED', errorCode: 'UNSUPPORTED_EVENT_VERSION' },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', eventType: 'regulatory.case.status-changed.v1' },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', consumerName: 'case-sla' },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
    ]);
    await db.sql`update integration.consumer_inbox set quarantined_at = now() - interval '3 days' where inbox_id = ${tooOld!.inbox_id}`;
    const [range] = await db.sql<{ from: string; to: string }[]>`
      select to_char((now() - interval '1 day') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as from,
             to_char((now() + interval '1 hour') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as to`;
    const { from, to } = range!;

    const result = await run(deps, {
      command: 'replay',
      consumer: 'case-projection',
      errorCode: 'PAYLOAD_INVALID',
      eventType: 'regulatory.case.accepted.v1',
      from,
      to,
      reason: 'schema relaxed',
    });

    expect(result.rows.map((r: { inboxId: string }) => r.inboxId)).toEqual([match!.inbox_id]);
    const statuses = await db.sql`select inbox_id, status from integration.consumer_inbox where status = 'RETRY_PENDING'`;
    expect(statuses.map((r) => r.inbox_id)).toEqual([match!.inbox_id]);
    for (const untouched of [wrongCode, wrongType, wrongConsumer, tooOld]) {
      expect((await rowOf(untouched!.inbox_id)).status).toBe('QUARANTINED');
    }
    const [audit] = await audits();
    expect(audit!.request.selection).toEqual({
      consumerName: 'case-projection',
      errorCode: 'PAYLOAD_INVALID',
      eventType: 'regulatory.case.accepted.v1',
      quarantinedFrom: from,
      quarantinedTo: to,
    });
  });

  it('is bounded by the limit, oldest received first, and says how many still match', async () => {
    const rows = await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'X', receivedSecondsAgo: 30 },
      { status: 'QUARANTINED', errorCode: 'X', receivedSecondsAgo: 10 },
      { status: 'QUARANTINED', errorCode: 'X', receivedSecondsAgo: 20 },
    ]);

    const result = await run(deps, { command: 'replay', consumer: 'case-projection', limit: 2, reason: 'batch 1' });

    expect(result).toMatchObject({ replayed: 2, remaining: 1 });
    expect(result.rows.map((r: { inboxId: string }) => r.inboxId)).toEqual([rows[0]!.inbox_id, rows[2]!.inbox_id]);
    expect((await rowOf(rows[1]!.inbox_id)).status).toBe('QUARANTINED');
    const [audit] = await audits();
    expect(audit).toMatchObject({ request: { limit: 2 }, affected_count: 2 });
  });
});

describe('dry run', () => {
  it('shows how many and which, changes no column of any row, and records itself as a dry run', async () => {
    const [first, second] = await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', receivedSecondsAgo: 5 },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', receivedSecondsAgo: 4 },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', receivedSecondsAgo: 3 },
      { status: 'PROCESSED' },
    ]);
    const before = await allInboxRows(db.sql);

    const result = await run(deps, { command: 'replay', consumer: 'case-projection', limit: 2, dryRun: true });

    expect(result).toMatchObject({ dryRun: true, matched: 3, wouldReplay: 2, limit: 2 });
    expect(result.rows).toHaveLength(2);
    expect(result.rows[0]).toMatchObject({
      consumer: 'case-projection',
      eventType: 'regulatory.case.accepted.v1',
      errorCode: 'PAYLOAD_INVALID',
    });
    expect(await allInboxRows(db.sql)).toEqual(before);
    const [audit, ...more] = await audits();
    expect(more).toHaveLength(0);
    expect(audit).toMatchObject({
      audit_id: result.auditId,
      action: 'replay',
      dry_run: true,
      actor: 'alice',
      reason: null,
      affected_count: 2,
      outcome: { matched: 3, priorErrorCodes: { PAYLOAD_INVALID: 2 } },
    });
    expect([...(audit!.inbox_ids as string[])].sort()).toEqual([first!.inbox_id, second!.inbox_id].sort());
  });

  it('needs no reason', async () => {
    const row = await quarantined();
    const result = await run(deps, { command: 'replay', ids: [row.inbox_id], dryRun: true });
    expect(result.matched).toBe(1);
  });
});

describe('refusals', () => {
  it('refuses a replay without a reason and changes nothing', async () => {
    const row = await quarantined();
    const before = await allInboxRows(db.sql);
    await opsError(run(deps, { command: 'replay', ids: [row.inbox_id] }), 'REASON_REQUIRED');
    expect(await allInboxRows(db.sql)).toEqual(before);
    expect(await audits()).toHaveLength(0);
  });

  it('refuses a Lambda replay that does not say who runs it', async () => {
    const row = await quarantined();
    await opsError(run(deps, { command: 'replay', ids: [row.inbox_id], reason: 'x' }, { source: 'lambda' }), 'ACTOR_REQUIRED');
    expect((await rowOf(row.inbox_id)).status).toBe('QUARANTINED');
  });

  it('refuses an unknown consumer, naming the known ones', async () => {
    const error = await opsError(run(deps, { command: 'replay', consumer: 'case-projektion', reason: 'x' }), 'UNKNOWN_CONSUMER');
    expect(error.message).toContain('case-projection');
  });

  it('fails with NO_ROWS_MATCH, and records nothing, when nothing matches', async () => {
    await quarantined({ errorCode: 'PAYLOAD_INVALID' });
    await opsError(run(deps, { command: 'replay', consumer: 'case-projection', errorCode: 'NOPE', reason: 'x' }), 'NO_ROWS_MATCH');
    await opsError(run(deps, { command: 'replay', consumer: 'case-sla', dryRun: true }), 'NO_ROWS_MATCH');
    expect(await audits()).toHaveLength(0);
  });

  it('refuses ambiguous or misspelt selections', async () => {
    const row = await quarantined();
    await opsError(run(deps, { command: 'replay', ids: [row.inbox_id], consumer: 'case-sla', reason: 'x' }), 'BAD_ARGUMENTS');
    await opsError(run(deps, { command: 'replay', reason: 'x' }), 'BAD_ARGUMENTS');
    // A typo must not widen the selection to the whole consumer.
    await opsError(run(deps, { command: 'replay', consumer: 'case-projection', errorcode: 'X', reason: 'x' }), 'BAD_ARGUMENTS');
    await opsError(run(deps, { command: 'replay', ids: ['not-a-uuid'], reason: 'x' }), 'BAD_ARGUMENTS');
    await opsError(run(deps, { command: 'replay', consumer: 'case-projection', limit: 0, reason: 'x' }), 'BAD_ARGUMENTS');
    await opsError(run(deps, { command: 'rerun' }), 'UNKNOWN_COMMAND');
    expect((await rowOf(row.inbox_id)).status).toBe('QUARANTINED');
    expect(await audits()).toHaveLength(0);
  });

  it('refuses more ids than the limit rather than replaying some and reporting the rest as skipped', async () => {
    const rows = [await quarantined(), await quarantined(), await quarantined()];
    const ids = rows.map((r) => r.inbox_id);

    const error = await opsError(run(deps, { command: 'replay', ids, limit: 2, reason: 'x' }), 'BAD_ARGUMENTS');
    expect(error.message).toContain('ids');
    await opsError(run(deps, { command: 'replay', ids, limit: 2, dryRun: true }), 'BAD_ARGUMENTS');
    for (const id of ids) expect((await rowOf(id)).status).toBe('QUARANTINED');
    expect(await audits()).toHaveLength(0);

    // The same id twice counts once.
    const result = await run(deps, { command: 'replay', ids: [ids[0], ids[0]!.toUpperCase(), ids[1]], limit: 2, reason: 'x' });
    expect(result).toMatchObject({ replayed: 2, remaining: 0, skipped: [] });
  });
});

describe('after a replay, the worker', () => {
  it('processes a replayed row that had used its whole attempt budget', async () => {
    const payload = caseAcceptedPayload('case_replayed');
    const row = await quarantined({ payload, errorCode: 'MAX_ATTEMPTS_EXCEEDED', attemptCount: 10 });

    await run(deps, { command: 'replay', ids: [row.inbox_id], reason: 'database incident over' });
    const result = await work(db.sql, caseProjection);

    expect(result).toMatchObject({ claimed: 1, processed: 1, quarantined: 0 });
    expect(await rowOf(row.inbox_id)).toMatchObject({ status: 'PROCESSED', attempt_count: 1 });
    const [summary] = await db.sql`select case_status, last_event_id from read_model.case_summary where case_id = 'case_replayed'`;
    expect(summary).toEqual({ case_status: 'ACCEPTED', last_event_id: (await rowOf(row.inbox_id)).event_id });
  });

  it('applies replayed events of one aggregate in aggregate-version order, whatever order they were received in', async () => {
    await db.sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_7', 'ACCEPTED', 0)`;
    const statusChanged = (version: number, newStatus: string, receivedSecondsAgo: number) => ({
      status: 'QUARANTINED' as const,
      errorCode: 'DB_INTEGRITY_VIOLATION',
      eventType: 'regulatory.case.status-changed.v1',
      aggregateId: 'case_7',
      aggregateVersion: version,
      receivedSecondsAgo,
      payload: { caseId: 'case_7', newStatus },
    });
    // Version 2 arrived first.
    await insertInboxRows(db.sql, [statusChanged(2, 'CLOSED', 60), statusChanged(1, 'IN_REVIEW', 30)]);

    await run(deps, { command: 'replay', consumer: 'case-projection', reason: 'constraint fixed' });
    const result = await work(db.sql, caseProjection);

    expect(result).toMatchObject({ processed: 2, quarantined: 0 });
    const [summary] = await db.sql`select case_status, last_aggregate_version from read_model.case_summary where case_id = 'case_7'`;
    expect(summary).toEqual({ case_status: 'CLOSED', last_aggregate_version: 2 });
  });
});
