/**
 * The claim's cost is bounded by the batch, whatever the statistics say: a backlog that
 * arrives after the last ANALYZE (statistics that say "nothing is due") is claimed with a
 * fixed budget of buffers per claimed row, with an empty history and with a million
 * finished rows, for uniform and for hot aggregates. Measured with EXPLAIN (ANALYZE,
 * BUFFERS) of the claim's own statement, the one the worker sends.
 *
 * Autovacuum is off for these tables here (and on the CI's PostgreSQL 15 server): nothing
 * refreshes the statistics behind the test's back.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { claimStatement } from '../../../functions/inbox/claim-due';
import { mskEvent, spreadRecords } from '../../../tools/msk-events';
import { ingestRoleOf, workerRoleOf } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { capture, nodes, rowsVisited, type PlanNode } from '../../helpers/plans';
import { CASE_TOPIC, ingestFor } from '../ingest/support';

const db = await useTestDatabase();
const sql = db.sql;
const CONSUMER = 'case-projection';
const asWorker = db.as(workerRoleOf({ name: CONSUMER }));
const LIMIT = 100;
/**
 * Buffers (shared hits + reads) per claimed row. A claim reads its lanes, each lane's run
 * (about runLength + 1 index entries and their heap rows) and the rows' primary keys, then
 * writes a new version of each row and its index entries and of each lane: measured here,
 * 25 to 40 per row, most of it the writes. The claim that walked due rows cost thousands
 * per row in these states (O(backlog) per row read).
 */
const BUDGET_PER_ROW = 50;
/**
 * Rows the plan's nodes produce or filter out, over all their loops, per claimed row
 * (rowsVisited): work the buffers do not show. Each step sees each lane or window row
 * about once: measured here, 38 per row (uniform) to 84 (hot: 21-row windows). Steps that
 * joined two CTEs ran as nested loops comparing every lane with every row: 250 to 537 per
 * row at 100 rows, and growing with the batch.
 */
const VISITS_PER_ROW = 120;

/** The plan's scans and their buffers, for the message of a failed budget. */
function scans(plan: PlanNode): string {
  return nodes(plan)
    .filter((n) => n['Node Type'].includes('Scan'))
    .map(
      (n) =>
        `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''}: ${(n['Shared Hit Blocks'] ?? 0) + (n['Shared Read Blocks'] ?? 0)} buffers`,
    )
    .join('; ');
}

/** One real claim of LIMIT rows under EXPLAIN (ANALYZE, BUFFERS). */
async function explainClaim(): Promise<{ claimed: number; buffers: number; plan: PlanNode }> {
  const statement = claimStatement(asWorker, {
    consumerName: CONSUMER,
    owner: `plan-test:${randomUUID()}`,
    limit: LIMIT,
    leaseSeconds: 60,
  });
  const [row] = await asWorker<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>`explain (analyze, buffers, format json) ${statement}`;
  const plan = row!['QUERY PLAN'][0].Plan;
  return { claimed: plan['Actual Rows'] ?? 0, buffers: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0), plan };
}

/** Events through the ingest code: `aggregates` cases, `perAggregate` versioned events each, interleaved. */
async function ingestBacklog(aggregates: number, perAggregate: number): Promise<void> {
  const ingest = ingestFor(db.as(ingestRoleOf({ name: CONSUMER })), CONSUMER);
  const total = aggregates * perAggregate;
  const tag = randomUUID().slice(0, 8);
  const records = spreadRecords({
    topic: CASE_TOPIC,
    partitions: 8,
    count: total,
    value: (n) => {
      const caseId = `case_${tag}_${n % aggregates}`;
      const version = Math.floor(n / aggregates) + 1;
      return {
        eventId: `evt_${tag}_${n}`,
        eventType: version === 1 ? 'regulatory.case.accepted.v1' : 'regulatory.case.status-changed.v1',
        eventVersion: 1,
        occurredAt: '2026-07-03T09:15:30Z',
        producer: 'case-command-service',
        aggregateType: 'case',
        aggregateId: caseId,
        aggregateVersion: version,
        payload: version === 1 ? { caseId, acceptedAt: '2026-07-03T09:15:30Z' } : { caseId, newStatus: `S${version}` },
      };
    },
  });
  for (let i = 0; i < records.length; i += 500) {
    const report = await ingest(mskEvent(records.slice(i, i + 500)));
    expect(report.response.batchItemFailures).toEqual([]);
  }
}

async function reset(): Promise<void> {
  await sql`truncate integration.consumer_inbox`;
  // The lanes of the previous case too (each case its own backlog), and their dead rows.
  await sql`delete from integration.consumer_lane`;
  await sql`vacuum integration.consumer_lane`;
}

beforeAll(async () => {
  await sql`alter table integration.consumer_inbox set (autovacuum_enabled = false, toast.autovacuum_enabled = false)`;
  await sql`alter table integration.consumer_lane set (autovacuum_enabled = false)`;
});

describe('a backlog that arrived after the last ANALYZE', () => {
  it('statistics taken while the inbox was empty: 100 rows of a 10,000-row backlog within the budget', async () => {
    await reset();
    await sql`analyze integration.consumer_inbox`;
    await sql`analyze integration.consumer_lane`;
    await ingestBacklog(10_000, 1);

    const { claimed, buffers, plan } = await explainClaim();

    expect(claimed).toBe(LIMIT);
    expect(buffers / claimed, scans(plan)).toBeLessThanOrEqual(BUDGET_PER_ROW);
    expect(rowsVisited(plan) / claimed).toBeLessThanOrEqual(VISITS_PER_ROW);
  });

  it('hot aggregates (20 × 500): a claim takes runs, within the same budget', async () => {
    await reset();
    await sql`analyze integration.consumer_inbox`;
    await sql`analyze integration.consumer_lane`;
    await ingestBacklog(20, 500);

    const { claimed, buffers, plan } = await explainClaim();

    expect(claimed).toBe(LIMIT);
    expect(buffers / claimed, scans(plan)).toBeLessThanOrEqual(BUDGET_PER_ROW);
    expect(rowsVisited(plan) / claimed).toBeLessThanOrEqual(VISITS_PER_ROW);
  });

  it('a worker that polled a nearly empty inbox, then a burst: the same connection claims within the budget', async () => {
    await reset();
    await ingestBacklog(3, 1);
    await sql`analyze integration.consumer_inbox`;
    await sql`analyze integration.consumer_lane`;
    // The claim as postgres.js sends it, prepared on one worker connection as postgres.js
    // prepares it, and executed as an idle worker polls: a dozen times on tables of a few
    // rows (PostgreSQL may keep a generic plan from the sixth execution on).
    const sent = await capture(
      db,
      (q) => claimStatement(q, { consumerName: CONSUMER, owner: 'poller', limit: LIMIT, leaseSeconds: 60 }).describe(),
      workerRoleOf({ name: CONSUMER }),
    );
    const { query, parameters } = sent[sent.length - 1]!;
    const args = parameters.map((p) => (typeof p === 'number' ? String(p) : `'${String(p).replace(/'/g, "''")}'`)).join(', ');
    const worker = db.client({ max: 1, role: workerRoleOf({ name: CONSUMER }) });
    try {
      await worker.unsafe(`prepare poll_claim as ${query}`);
      for (let i = 0; i < 12; i++) await worker.unsafe(`execute poll_claim(${args})`);
      await ingestBacklog(10_000, 1);

      const [row] = await worker.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(
        `explain (analyze, buffers, format json) execute poll_claim(${args})`,
      );
      const plan = row!['QUERY PLAN'][0].Plan;
      const claimed = plan['Actual Rows'] ?? 0;
      const buffers = (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0);

      expect(claimed).toBe(LIMIT);
      // Planned for the tables as they are now (a plan kept from the polling read both
      // tables once per lane: 800 buffers per row). Rows visited are not held to
      // VISITS_PER_ROW here: on a lane table this small a single scan of it is the
      // cheaper way to check 100 lanes, and the planner may take it.
      expect(buffers / claimed, scans(plan)).toBeLessThanOrEqual(BUDGET_PER_ROW);
    } finally {
      await worker.end();
    }
  });

  it('1,000,000 finished rows analyzed while nothing was due, then a 10,000-row backlog: within the budget', async () => {
    await reset();
    // The history, as a month of finished rows leaves it (payloads purged): inserted by
    // SQL, not through ingest, because only its size matters here.
    await sql`
      insert into integration.consumer_inbox (
        consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, aggregate_version,
        topic_name, partition_no, offset_no, producer, occurred_at, received_at, status, attempt_count,
        processed_at, payload, payload_purged_at)
      select ${CONSUMER}, 'old_' || n, 'regulatory.case.accepted.v1', 1, 'case', 'old_case_' || (n % 200000), (n / 200000) + 1,
             ${CASE_TOPIC}, n % 8, n / 8, 'case-command-service', now() - interval '20 days', now() - interval '20 days',
             'PROCESSED', 1, now() - interval '20 days', '{}'::jsonb, now() - interval '13 days'
      from generate_series(1, 1000000) as n`;
    await sql`analyze integration.consumer_inbox`;
    await sql`analyze integration.consumer_lane`;
    await ingestBacklog(10_000, 1);

    const { claimed, buffers, plan } = await explainClaim();

    expect(claimed).toBe(LIMIT);
    expect(buffers / claimed, scans(plan)).toBeLessThanOrEqual(BUDGET_PER_ROW);
    expect(rowsVisited(plan) / claimed).toBeLessThanOrEqual(VISITS_PER_ROW);
  }, 180_000);
});
