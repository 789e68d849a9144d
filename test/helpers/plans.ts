/**
 * Query-plan checks: run the real statements on a client that records what it sends, then
 * EXPLAIN each one and look for sequential scans of the big tables.
 */
import { expect } from 'vitest';
import type { Sql } from '../../functions/lib/db';
import type { TestDatabase } from './db';

interface Captured {
  query: string;
  parameters: unknown[];
}

/** Run `act` on a client that records every statement it sends, and return them. */
async function capture(db: TestDatabase, act: (sql: Sql) => Promise<unknown>): Promise<Captured[]> {
  const captured: Captured[] = [];
  const sql = db.client({
    max: 1,
    debug: (_connection, query, parameters) => captured.push({ query, parameters: [...(parameters as unknown[])] }),
  });
  try {
    await act(sql);
  } finally {
    await sql.end();
  }
  return captured;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

async function planOf(db: TestDatabase, statement: Captured): Promise<PlanNode[]> {
  const [row] = await db.sql.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(
    `explain (format json) ${statement.query}`,
    statement.parameters as never[],
  );
  return nodes(row!['QUERY PLAN'][0].Plan);
}

const TABLES = ['consumer_inbox', 'consumer_raw_poison'];

/** Every statement `act` sends reads the inbox and poison tables through indexes, these among them. */
export async function expectIndexOnly(db: TestDatabase, act: (sql: Sql) => Promise<unknown>, indexes: string[]): Promise<void> {
  const statements = await capture(db, act);
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
