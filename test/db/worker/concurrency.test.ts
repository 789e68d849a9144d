/**
 * Workers racing: exactly-once status changes and effects, fencing on the lease owner,
 * and per-aggregate order across workers.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { CASE_STATUS_CHANGED, caseProjection } from '../../../functions/consumers/case-projection';
import { caseSla } from '../../../functions/consumers/case-sla';
import { claimDue } from '../../../functions/inbox/claim-due';
import { completeRows } from '../../../functions/inbox/complete';
import { releaseExpired } from '../../../functions/inbox/release-expired';
import type { Sql } from '../../../functions/lib/db';
import { ErrorCodes } from '../../../functions/lib/errors';
import { lanesOf, processBatch } from '../../../functions/worker/process-batch';
import { newOwnerId } from '../../../functions/worker/run-worker';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { inboxRow, one, variant, work, workerConfig } from './support';
import { DatabaseRoles, workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const sql = db.sql;
/** The code under test connects as the worker function does. */
const asWorker = db.as(workerRoleOf(caseProjection));

// The test's instruments, not the code under test: SECURITY DEFINER, so they record what
// the worker's role does without needing the worker to be able to write the audit tables.
await sql.unsafe(`
  -- Every claim (a row becoming PROCESSING) and every application to the domain tables.
  create table public.claim_audit (inbox_id uuid not null, owner text not null);
  create function public.audit_claim() returns trigger language plpgsql security definer as $$
  begin
    if new.status = 'PROCESSING' and old.status is distinct from 'PROCESSING' then
      insert into public.claim_audit values (new.inbox_id, new.locked_by);
    end if;
    return new;
  end $$;
  create trigger audit_claim after update on integration.consumer_inbox
    for each row execute function public.audit_claim();

  create table public.apply_audit (seq bigserial primary key, tbl text not null, case_id text not null,
                                   version bigint, status text, event_id text);
  create function public.audit_case_summary() returns trigger language plpgsql security definer as $$
  begin
    insert into public.apply_audit (tbl, case_id, version, status, event_id)
    values ('case_summary', new.case_id, new.last_aggregate_version, new.case_status, new.last_event_id);
    return new;
  end $$;
  create trigger audit_case_summary after insert or update on read_model.case_summary
    for each row execute function public.audit_case_summary();
  create function public.audit_sla() returns trigger language plpgsql security definer as $$
  begin
    insert into public.apply_audit (tbl, case_id, event_id) values ('sla_obligation', new.case_id, new.source_event_id);
    return new;
  end $$;
  create trigger audit_sla after insert on case_core.sla_obligation
    for each row execute function public.audit_sla();`);

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary, case_core.sla_obligation,
                     public.claim_audit, public.apply_audit`;
});

function accepted(consumerName: string, n: number): InboxRowSpec[] {
  return Array.from({ length: n }, (_, i) => ({
    consumerName,
    aggregateId: `case_${i}`,
    payload: { caseId: `case_${i}`, acceptedAt: '2026-07-03T09:15:30Z' },
  }));
}

/** Four workers, each on its own client (its own Lambda container), racing to drain. */
async function race(consumer: Parameters<typeof work>[1], workers: number, batchSize: number): Promise<void> {
  const clients: Sql[] = Array.from({ length: workers }, () => db.client({ max: 1, role: workerRoleOf(consumer) }));
  // Repeat until drained: a worker stops when everything due belongs to aggregates in flight.
  for (let round = 0; round < 50; round++) {
    await Promise.all(clients.map((c) => work(c, consumer, { config: workerConfig({ batchSize }) })));
    const { open } = await one(sql<{ open: number }[]>`
      select count(*)::int as open from integration.consumer_inbox
      where consumer_name = ${consumer.name} and status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING')`);
    if (open === 0) return;
  }
  throw new Error('workers did not drain the inbox');
}

describe('workers racing', () => {
  it('four workers over 2,000 rows: each claimed and PROCESSED once, each effect applied once', async () => {
    await insertInboxRows(sql, accepted('case-projection', 2_000));
    await insertInboxRows(sql, accepted('case-sla', 2_000));

    await Promise.all([race(caseProjection, 4, 25), race(caseSla, 4, 25)]);

    const statuses = await sql<{ consumer_name: string; status: string; attempts: number; n: number }[]>`
      select consumer_name, status, max(attempt_count)::int as attempts, count(*)::int as n
      from integration.consumer_inbox group by 1, 2 order by 1, 2`;
    expect(statuses).toEqual([
      { consumer_name: 'case-projection', status: 'PROCESSED', attempts: 1, n: 2_000 },
      { consumer_name: 'case-sla', status: 'PROCESSED', attempts: 1, n: 2_000 },
    ]);
    const [claims] = await sql<{ claims: number; rows: number; owners: number }[]>`
      select count(*)::int as claims, count(distinct inbox_id)::int as rows, count(distinct owner)::int as owners
      from public.claim_audit`;
    expect(claims).toMatchObject({ claims: 4_000, rows: 4_000 });
    expect(claims!.owners).toBeGreaterThan(1);
    const applied = await sql<{ tbl: string; n: number; events: number }[]>`
      select tbl, count(*)::int as n, count(distinct event_id)::int as events from public.apply_audit group by 1 order by 1`;
    expect(applied).toEqual([
      { tbl: 'case_summary', n: 2_000, events: 2_000 },
      { tbl: 'sla_obligation', n: 2_000, events: 2_000 },
    ]);
  });

  it('versions 1..6 of each case delivered in reverse order apply in version order across workers', async () => {
    const cases = 20;
    const specs: InboxRowSpec[] = [];
    for (let c = 0; c < cases; c++) {
      for (let v = 6; v >= 1; v--) {
        specs.push({
          aggregateId: `case_${c}`,
          aggregateVersion: v,
          // Reverse arrival: version 6 was received first.
          receivedSecondsAgo: 10 - v,
          ...(v === 1
            ? { payload: { caseId: `case_${c}`, acceptedAt: '2026-07-03T09:15:30Z' } }
            : { eventType: CASE_STATUS_CHANGED, payload: { caseId: `case_${c}`, newStatus: `STATUS_${v}` } }),
        });
      }
    }
    await insertInboxRows(sql, specs);

    await race(caseProjection, 3, 5);

    const order = await sql<{ case_id: string; versions: number[] }[]>`
      select case_id, array_agg(version order by seq) as versions from public.apply_audit
      where tbl = 'case_summary' group by case_id`;
    expect(order).toHaveLength(cases);
    for (const o of order) expect(o.versions.map(Number)).toEqual([1, 2, 3, 4, 5, 6]);
    const finals = await sql<{ case_status: string; last_aggregate_version: number }[]>`
      select distinct case_status, last_aggregate_version from read_model.case_summary`;
    expect(finals).toEqual([{ case_status: 'STATUS_6', last_aggregate_version: 6 }]);
    const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_inbox where status <> 'PROCESSED'`);
    expect(n).toBe(0);
  });

  it('a missing version is held without using the attempt budget, then applied in order once it arrives', async () => {
    const consumer = variant(caseProjection, { retry: { versionGapRetrySeconds: 1 } });
    await insertInboxRows(sql, [
      { aggregateId: 'case_gap', aggregateVersion: 1, payload: { caseId: 'case_gap', acceptedAt: '2026-07-03T09:15:30Z' } },
      ...[6, 5, 4, 3].map((v) => ({
        aggregateId: 'case_gap',
        aggregateVersion: v,
        eventType: CASE_STATUS_CHANGED,
        payload: { caseId: 'case_gap', newStatus: `STATUS_${v}` },
      })),
    ]);

    await work(asWorker, consumer);

    const held = await sql<{ aggregate_version: number; status: string; error_code: string; attempt_count: number; delay: number }[]>`
      select aggregate_version, status, error_code, attempt_count,
             extract(epoch from next_attempt_at - updated_at)::float8 as delay
      from integration.consumer_inbox where aggregate_version = 3`;
    expect(held).toEqual([
      { aggregate_version: 3, status: 'RETRY_PENDING', error_code: ErrorCodes.AGGREGATE_VERSION_GAP, attempt_count: 0, delay: 1 },
    ]);
    const [caseRow] = await sql<{ last_aggregate_version: number }[]>`select last_aggregate_version from read_model.case_summary`;
    expect(caseRow!.last_aggregate_version).toBe(1);

    await insertInboxRows(sql, [
      {
        aggregateId: 'case_gap',
        aggregateVersion: 2,
        eventType: CASE_STATUS_CHANGED,
        payload: { caseId: 'case_gap', newStatus: 'STATUS_2' },
      },
    ]);
    await sql`update integration.consumer_inbox set next_attempt_at = now() where status = 'RETRY_PENDING'`;
    await race(consumer, 2, 5);

    const [order] = await sql<{ versions: number[] }[]>`select array_agg(version order by seq) as versions from public.apply_audit`;
    expect(order!.versions.map(Number)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('a gap held past the bounded wait is quarantined AGGREGATE_VERSION_GAP', async () => {
    const [row] = await insertInboxRows(sql, [
      {
        aggregateId: 'case_stuck',
        aggregateVersion: 4,
        eventType: CASE_STATUS_CHANGED,
        payload: { caseId: 'case_stuck', newStatus: 'CLOSED' },
        receivedSecondsAgo: caseProjection.retry.versionGapMaxWaitSeconds + 1,
      },
    ]);

    await work(asWorker, caseProjection);

    expect(await inboxRow(sql, row!.inbox_id)).toMatchObject({ status: 'QUARANTINED', error_code: ErrorCodes.AGGREGATE_VERSION_GAP });
  });

  it('a version at or below the last applied is a stale duplicate: PROCESSED without effect', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_old', 'CLOSED', 4)`;
    const [row] = await insertInboxRows(sql, [
      {
        aggregateId: 'case_old',
        aggregateVersion: 3,
        eventType: CASE_STATUS_CHANGED,
        payload: { caseId: 'case_old', newStatus: 'IN_REVIEW' },
      },
    ]);

    await work(asWorker, caseProjection);

    expect(await inboxRow(sql, row!.inbox_id)).toMatchObject({ status: 'PROCESSED', error_code: null });
    const [c] = await sql<{ case_status: string; last_aggregate_version: number }[]>`
      select case_status, last_aggregate_version from read_model.case_summary where case_id = 'case_old'`;
    expect(c).toEqual({ case_status: 'CLOSED', last_aggregate_version: 4 });
  });

  it('a backlog of one aggregate in flight does not hide other aggregates from the claim', async () => {
    const hot = (v: number): InboxRowSpec => ({
      aggregateId: 'case_hot',
      aggregateVersion: v,
      eventType: CASE_STATUS_CHANGED,
      payload: { caseId: 'case_hot', newStatus: `S${v}` },
      receivedSecondsAgo: 100 - v,
    });
    await insertInboxRows(sql, [
      { ...hot(1), status: 'PROCESSING', lockedBy: 'someone-else' },
      ...Array.from({ length: 50 }, (_, i) => hot(i + 2)),
      { aggregateId: 'case_cold', payload: { caseId: 'case_cold', acceptedAt: '2026-07-03T09:15:30Z' } },
    ]);

    // A window of 4 × 5 = 20 rows: all 50 older rows belong to the aggregate in flight.
    const claimed = await claimDue(asWorker, { consumerName: 'case-projection', owner: newOwnerId('t'), limit: 5, leaseSeconds: 60 });

    expect(claimed.rows.map((r) => r.aggregate_id)).toEqual(['case_cold']);
  });

  it('of concurrent claims, one takes the whole run of an aggregate and the others none of it', async () => {
    await insertInboxRows(
      sql,
      [1, 2, 3, 4].map((v) => ({
        aggregateId: 'case_one',
        aggregateVersion: v,
        eventType: CASE_STATUS_CHANGED,
        payload: { caseId: 'case_one', newStatus: `S${v}` },
      })),
    );
    const clients = [0, 1, 2].map(() => db.client({ max: 1, role: workerRoleOf(caseProjection) }));

    const claims = await Promise.all(
      clients.map((c) => claimDue(c, { consumerName: 'case-projection', owner: newOwnerId('t'), limit: 10, leaseSeconds: 60 })),
    );

    const versions = claims.map((c) => c.rows.map((r) => r.aggregate_version));
    expect(versions.filter((v) => v.length > 0)).toEqual([[1, 2, 3, 4]]);
  });
});

describe('fencing on the lease owner', () => {
  const caseRow = (id: string) => ({ aggregateId: id, payload: { caseId: id, acceptedAt: '2026-07-03T09:15:30Z' } });
  const ctx = (owner: string) => ({ sql: asWorker, consumer: caseProjection, owner, remainingMs: () => 60_000, safetyMarginMs: 1_000 });

  it('a lease taken over makes the first worker’s batch and completion no-ops', async () => {
    const [row] = await insertInboxRows(sql, [caseRow('case_taken')]);
    const first = newOwnerId('first');
    const second = newOwnerId('second');
    const claimedByFirst = await claimDue(asWorker, { consumerName: 'case-projection', owner: first, limit: 10, leaseSeconds: 60 });
    // The lease expires and the reaper hands the row and its lane back.
    await sql`update integration.consumer_inbox set lease_expires_at = now() - interval '1 second' where inbox_id = ${row!.inbox_id}`;
    expect(await releaseExpired(db.as(DatabaseRoles.reaper), 'case-projection', 10, 100)).toHaveLength(1);
    const claimedBySecond = await claimDue(asWorker, { consumerName: 'case-projection', owner: second, limit: 10, leaseSeconds: 60 });
    expect(claimedBySecond.rows.map((r) => r.inbox_id)).toEqual([row!.inbox_id]);

    const report = await processBatch(ctx(first), lanesOf(claimedByFirst));
    const late = await completeRows(asWorker, first, [{ inboxId: row!.inbox_id, status: 'PROCESSED' }]);

    expect(report.lost.map((r) => r.inbox_id)).toEqual([row!.inbox_id]);
    expect(report.completed).toEqual([]);
    expect(late).toEqual([]);
    expect(await inboxRow(sql, row!.inbox_id)).toMatchObject({ status: 'PROCESSING', locked_by: second, attempt_count: 2 });
    const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from read_model.case_summary`);
    expect(n).toBe(0);

    const secondReport = await processBatch(ctx(second), lanesOf(claimedBySecond));
    expect(secondReport.completed.map((r) => r.outcome.status)).toEqual(['PROCESSED']);
    expect(await inboxRow(sql, row!.inbox_id)).toMatchObject({ status: 'PROCESSED', locked_by: null });
  });

  it('a batch does not start rows whose lease has expired, even if nobody took them yet', async () => {
    const [row] = await insertInboxRows(sql, [caseRow('case_expired')]);
    const owner = newOwnerId('slow');
    const claimed = await claimDue(asWorker, { consumerName: 'case-projection', owner, limit: 10, leaseSeconds: 60 });
    await sql`update integration.consumer_inbox set lease_expires_at = now() - interval '1 second' where inbox_id = ${row!.inbox_id}`;

    const report = await processBatch(ctx(owner), lanesOf(claimed));

    expect(report.lost).toHaveLength(1);
    expect(await inboxRow(sql, row!.inbox_id)).toMatchObject({ status: 'PROCESSING', locked_by: owner });
    const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from read_model.case_summary`);
    expect(n).toBe(0);
  });

  it('a release of expired leases waits for a running batch and then finds nothing to release', async () => {
    const [row] = await insertInboxRows(sql, [caseRow('case_busy')]);
    const owner = newOwnerId('busy');
    const acceptedHandler = caseProjection.handlers['regulatory.case.accepted.v1']![1]!;
    // A slow handler: the lease (0.3 s) expires while the batch is still running.
    const slow = variant(caseProjection, {
      handlers: {
        'regulatory.case.accepted.v1': {
          1: {
            ...acceptedHandler,
            async handle(tx, event, context) {
              await tx`select pg_sleep(1)`;
              await acceptedHandler.handle(tx, event, context);
            },
          },
        },
      },
    });
    const claimed = await claimDue(asWorker, { consumerName: 'case-projection', owner, limit: 10, leaseSeconds: 0.3 });
    const reaper = db.client({ max: 1, role: DatabaseRoles.reaper });

    const batch = processBatch({ ...ctx(owner), consumer: slow }, lanesOf(claimed));
    await new Promise((r) => setTimeout(r, 600));
    // What a reaper does with an expired lease; it must wait for the batch's row lock.
    const released = await reaper<{ inbox_id: string }[]>`
      update integration.consumer_inbox set status = 'RETRY_PENDING', locked_by = null, locked_at = null, lease_expires_at = null
      where status = 'PROCESSING' and lease_expires_at < now() returning inbox_id`;
    const report = await batch;

    expect(released).toEqual([]);
    expect(report.completed.map((r) => r.outcome.status)).toEqual(['PROCESSED']);
    expect(await inboxRow(sql, row!.inbox_id)).toMatchObject({ status: 'PROCESSED', attempt_count: 1 });
    const { n } = await one(sql<{ n: number }[]>`select count(*)::int as n from public.apply_audit`);
    expect(n).toBe(1);
  });
});
