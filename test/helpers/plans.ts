/**
 * Query-plan checks: run the real statements on a client that records what it sends, then
 * EXPLAIN each one and look for sequential scans of the big tables.
 */
import { expect } from 'vitest';
import type { Sql } from '../../functions/lib/db';
import type { DatabaseRole } from '../../functions/lib/database-roles';
import type { TestDatabase } from './db';
import { insertInboxRows } from './factories';

interface Captured {
  query: string;
  parameters: unknown[];
}

/** Run `act` on a client that records every statement it sends, and return them. */
export async function capture(db: TestDatabase, act: (sql: Sql) => Promise<unknown>, role?: DatabaseRole): Promise<Captured[]> {
  const captured: Captured[] = [];
  const sql = db.client({
    max: 1,
    ...(role !== undefined ? { role } : {}),
    debug: (_connection, query, parameters) => captured.push({ query, parameters: [...(parameters as unknown[])] }),
  });
  try {
    await act(sql);
  } finally {
    await sql.end();
  }
  return captured;
}

/** A node of EXPLAIN's JSON plan; the figures are there with ANALYZE and BUFFERS. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  /** With ANALYZE; Actual Rows and Rows Removed by … are per loop. */
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Join Filter'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/** The plan's nodes, the root first. */
export function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/**
 * Rows every node of an analyzed plan produced or filtered out, over all its loops: the
 * work a statement did, in rows. A statement whose figure grows with the square of its
 * batch (a subplan run for every pair of rows) shows here, whatever the machine's speed.
 */
export function rowsVisited(plan: PlanNode): number {
  return nodes(plan).reduce(
    (sum, n) =>
      sum +
      ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Join Filter'] ?? 0)) * (n['Actual Loops'] ?? 1),
    0,
  );
}

async function planOf(db: TestDatabase, statement: Captured): Promise<PlanNode[]> {
  const [row] = await db.sql.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(
    `explain (format json) ${statement.query}`,
    statement.parameters as never[],
  );
  return nodes(row!['QUERY PLAN'][0].Plan);
}

/**
 * Run `act`, then EXPLAIN ANALYZE each statement it sent, as sent: the plans of a second
 * execution. For statements whose second run does what the first did (a check, or a
 * change that the first run left nothing for).
 *
 * `generic`: the plan a prepared statement settles on after its first five runs (postgres.js
 * prepares every statement unless DB_PREPARE=false), made for any parameter value; the
 * reaper and the workers run the same statements every minute, so this is the plan they use.
 */
export async function analyzedPlans(
  db: TestDatabase,
  act: (sql: Sql) => Promise<unknown>,
  options: { role?: DatabaseRole; generic?: boolean } = {},
): Promise<PlanNode[]> {
  const statements = await capture(db, act, options.role);
  const plans: PlanNode[] = [];
  await db.sql.begin(async (tx) => {
    if (options.generic) await tx`set local plan_cache_mode = force_generic_plan`;
    for (const statement of statements) {
      const [row] = await tx.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(
        `explain (analyze, format json) ${statement.query}`,
        statement.parameters as never[],
      );
      plans.push(row!['QUERY PLAN'][0].Plan);
    }
  });
  return plans;
}

const TABLES = ['consumer_inbox', 'consumer_raw_poison', 'consumed_events'];

/** Every statement `act` sends reads the inbox and poison tables through indexes, these among them. */
export async function expectIndexOnly(
  db: TestDatabase,
  act: (sql: Sql) => Promise<unknown>,
  indexes: string[],
  role?: DatabaseRole,
): Promise<void> {
  const statements = await capture(db, act, role);
  expect(statements.length).toBeGreaterThan(0);
  const used = new Set<string>();
  for (const statement of statements) {
    const plan = await planOf(db, statement);
    const seqScans = plan.filter((n) => n['Node Type'] === 'Seq Scan' && TABLES.includes(n['Relation Name'] ?? ''));
    expect(seqScans, statement.query).toEqual([]);
    for (const n of plan) if (n['Index Name']) used.add(n['Index Name']);
  }
  for (const index of indexes) expect([...used]).toContain(index);
}

/**
 * A steady state in miniature, for plan checks: 50,000 finished rows over the last 29 days,
 * those past the 7-day payload retention already purged by earlier runs; a little new work
 * for each reaper step (rows just past the payload retention, rows just past the dedupe
 * window); 100 due, 5 in flight, 5 quarantined, 2,000 poison rows; 40,100 keys of rows that
 * left the inbox (integration.consumed_events). Analyzed, as autovacuum
 * would have done by then.
 */
export async function arrangeHistory(db: Sql): Promise<void> {
  await db`
    insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type,
      aggregate_id, topic_name, partition_no, offset_no, producer, occurred_at, received_at, status,
      processed_at, payload_purged_at, payload)
    select 'case-projection', 'evt_hist_' || g, 'regulatory.case.accepted.v1', 1, 'case', 'case_' || g,
           'regulatory.case.events.v1', 0, g, 'case-command-service', now(), h.processed_at, 'PROCESSED',
           h.processed_at,
           case when h.processed_at < now() - interval '7 days 1 hour' then h.processed_at + interval '7 days' end,
           '{}'
    from generate_series(1, 50200) g
    cross join lateral (
      select case when g <= 50000 then now() - make_interval(secs => g * 50)
                  when g <= 50100 then now() - interval '7 days 30 minutes'
                  else now() - interval '31 days' end as processed_at
    ) h`;
  await db`
    update integration.consumer_inbox set payload_purged_at = processed_at + interval '7 days'
    where processed_at < now() - interval '30 days'`;
  // Keys of rows that already left the inbox: 40,000 over the 23 days between the payload
  // retention and the end of the window, and 100 whose window has just ended.
  await db`
    insert into integration.consumed_events (consumer_name, event_id, inbox_id, event_type, status, topic_name,
      partition_no, offset_no, received_at, processed_at, dedupe_until)
    select 'case-projection', 'evt_left_' || g, gen_random_uuid(), 'regulatory.case.accepted.v1', 'PROCESSED',
           'regulatory.case.events.v1', 0, g, k.processed_at, k.processed_at, k.processed_at + interval '30 days'
    from generate_series(1, 40100) g
    cross join lateral (
      select case when g <= 40000 then now() - interval '7 days' - make_interval(secs => g * 49)
                  else now() - interval '30 days 10 minutes' end as processed_at
    ) k`;
  await db`
    insert into integration.consumer_raw_poison (consumer_name, topic_name, partition_no, offset_no, error_message, created_at)
    select 'case-projection', 'regulatory.case.events.v1', 1, g, 'not json', now() - make_interval(secs => g * 1000)
    from generate_series(1, 2000) g`;
  await insertInboxRows(db, [
    ...Array.from({ length: 100 }, () => ({ status: 'RECEIVED' as const })),
    ...Array.from({ length: 5 }, () => ({ status: 'PROCESSING' as const, leaseExpiresInSeconds: 60 })),
    ...Array.from({ length: 5 }, () => ({ status: 'QUARANTINED' as const, errorCode: 'PAYLOAD_INVALID' })),
  ]);
  await db`analyze integration.consumer_inbox`;
  await db`analyze integration.consumer_raw_poison`;
  await db`analyze integration.consumed_events`;
}
