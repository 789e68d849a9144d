/**
 * `npm run bench -- growth [--rows 20000] [--history 1000000] [--rounds 5]`
 *
 * Does the claim stay fast as the table's history grows? Claim-and-process throughput of
 * the real worker loop (runWorker: claim → dispatch to case-projection → fenced complete)
 * over `--rows` due rows, first with an empty history, then with `--history` finished
 * rows of the same consumer in the table (a month's shape: processed over 30 days, the
 * ones past the 7-day payload retention already purged). The ratio history / empty is
 * what the design promises stays near 1: finished rows are outside the claim's partial
 * indexes, so the claim reads only the backlog. Aim: >= 0.9.
 *
 * The two cases live in two databases of one server, and their rounds alternate (empty,
 * history, empty, …), so that whatever else the machine is doing weighs on both alike.
 * Each round starts from the same state: the previous round's rows deleted, the domain
 * table emptied, VACUUM ANALYZE, then `--rows` due rows inserted and analysed. After one
 * unmeasured warm-up round each, the medians of `--rounds` are printed, and the median of
 * the per-round ratios (each history round against the empty round just before it), which
 * is the steadier figure on a busy machine. Compare ratios, not absolutes.
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import postgres from 'postgres';
import { randomBytes } from 'node:crypto';
import { getConsumer } from '../functions/consumers';
import { DEFAULTS } from '../functions/lib/config';
import { TYPES, type Sql } from '../functions/lib/db';
import { loadMigrations, migrate, MIGRATIONS_DIR } from '../functions/lib/migrate';
import { runWorker } from '../functions/worker/run-worker';
import { withDatabase } from '../tools/database-url';
import { benchServer } from './_server';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '20000' },
    history: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '5' },
  },
});
// The worker adds a latency metric per row; its EMF lines would bury the figures.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';
const ROWS = Number(args.rows);
const HISTORY = Number(args.history);
const ROUNDS = Number(args.rounds);
const consumer = getConsumer('case-projection');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const server = await benchServer();
const serverUrl = server.url;
const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
const logger = new Logger({ serviceName: 'bench', logLevel: 'SILENT' });
const metrics = new Metrics({ namespace: 'Bench', serviceName: 'bench' });

interface BenchDatabase {
  name: string;
  sql: Sql;
}

async function createDatabase(label: string): Promise<BenchDatabase> {
  const name = `inbox_bench_growth_${label}_${randomBytes(4).toString('hex')}`;
  await admin.unsafe(`create database "${name}"`);
  const sql = postgres(withDatabase(serverUrl, name), { max: 4, onnotice: () => {}, types: TYPES }) as unknown as Sql;
  await migrate(sql, await loadMigrations(MIGRATIONS_DIR));
  return { name, sql };
}

/** Remove the previous round's rows and effects, vacuum, and queue `ROWS` fresh due rows. */
async function prepareRound(sql: Sql, round: number): Promise<void> {
  await sql`delete from integration.consumer_inbox where event_id like 'evt_bench_%'`;
  await sql`truncate read_model.case_summary`;
  await sql`vacuum analyze integration.consumer_inbox`;
  await sql`
    insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type,
      aggregate_id, topic_name, partition_no, offset_no, producer, occurred_at, status, payload)
    select ${consumer.name}, 'evt_bench_' || ${round} || '_' || g, 'regulatory.case.accepted.v1', 1, 'case',
           'case_bench_' || g, 'regulatory.case.events.v1', g % 8, 10000000 + g, 'case-command-service', now(),
           'RECEIVED', jsonb_build_object('caseId', 'case_bench_' || g, 'acceptedAt', '2026-07-03T09:15:30Z')
    from generate_series(1, ${ROWS}) g`;
  await sql`analyze integration.consumer_inbox`;
}

/** Drain the queue with the worker loop, as consecutive invocations would; returns rows/s. */
async function drain(sql: Sql): Promise<number> {
  const started = performance.now();
  let processed = 0;
  while (processed < ROWS) {
    const r = await runWorker({
      sql,
      consumer,
      config: { worker: { batchSize: DEFAULTS.workerBatchSize, safetyMarginMs: 0, leaseSeconds: DEFAULTS.leaseSeconds } },
      logger,
      metrics,
      remainingMs: () => 600_000,
    });
    if (r.claimed === 0) throw new Error(`worker stopped with ${processed} of ${ROWS} processed`);
    if (r.processed !== r.claimed) throw new Error(`worker processed ${r.processed} of ${r.claimed} claimed`);
    processed += r.processed;
  }
  return processed / ((performance.now() - started) / 1000);
}

/**
 * A month's history in one set-based statement: processed evenly over 30 days; rows past
 * the 7-day payload retention already purged, the rest with a small payload.
 */
async function loadHistory(sql: Sql): Promise<number> {
  const t = performance.now();
  await sql`
    insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type,
      aggregate_id, topic_name, partition_no, offset_no, producer, occurred_at, received_at, status,
      attempt_count, processed_at, payload_purged_at, payload)
    select ${consumer.name}, 'evt_hist_' || g, 'regulatory.case.accepted.v1', 1, 'case', 'case_hist_' || (g % 100000),
           'regulatory.case.events.v1', g % 8, g, 'case-command-service', h.at, h.at, 'PROCESSED', 1, h.at,
           case when h.at < now() - interval '7 days' then h.at + interval '7 days' end,
           case when h.at < now() - interval '7 days' then '{}'::jsonb
                else jsonb_build_object('caseId', 'case_hist_' || (g % 100000), 'acceptedAt', '2026-07-03T09:15:30Z') end
    from generate_series(1, ${HISTORY}) g
    cross join lateral (select now() - make_interval(secs => g * (30 * 86400.0 / ${HISTORY}))) as h(at)`;
  await sql`vacuum analyze integration.consumer_inbox`;
  return (performance.now() - t) / 1000;
}

async function sizes(sql: Sql): Promise<string> {
  const rows = await sql<{ name: string; size: string }[]>`
    select c.relname as name, pg_size_pretty(pg_relation_size(c.oid)) as size
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'integration' and c.relname like 'consumer_inbox%'
    order by pg_relation_size(c.oid) desc`;
  return rows.map((r) => `    ${r.name.padEnd(44)} ${r.size}`).join('\n');
}

const databases: BenchDatabase[] = [];
try {
  const empty = await createDatabase('empty');
  databases.push(empty);
  const history = await createDatabase('history');
  databases.push(history);
  const loadSeconds = await loadHistory(history.sql);

  const rates = { empty: [] as number[], history: [] as number[] };
  for (let round = 0; round <= ROUNDS; round++) {
    for (const [name, db] of [['empty', empty], ['history', history]] as const) {
      await prepareRound(db.sql, round);
      const rate = await drain(db.sql);
      if (round > 0) rates[name].push(rate); // round 0 warms plans, JIT and buffers
    }
  }
  const emptyRate = median(rates.empty);
  const historyRate = median(rates.history);
  const fmt = (xs: number[]) => xs.map((x) => Math.round(x)).join(', ');

  console.log(`\ngrowth benchmark: ${ROWS} due rows drained by runWorker (case-projection, batch ${DEFAULTS.workerBatchSize}), median of ${ROUNDS}`);
  console.log(`  empty history        ${Math.round(emptyRate).toString().padStart(7)} rows/s   (rounds: ${fmt(rates.empty)})`);
  console.log(`  ${HISTORY.toLocaleString('en-US').padEnd(9)} finished   ${Math.round(historyRate).toString().padStart(7)} rows/s   (rounds: ${fmt(rates.history)}; history loaded in ${loadSeconds.toFixed(1)} s)`);
  const paired = rates.history.map((h, i) => h / rates.empty[i]!);
  console.log(`\n  history / empty = ${(historyRate / emptyRate).toFixed(2)} (medians)   ${median(paired).toFixed(2)} (median of per-round ratios: ${paired.map((r) => r.toFixed(2)).join(', ')})   aim ≥ 0.9`);
  console.log(`\n  relation sizes with the history:\n${await sizes(history.sql)}`);
} finally {
  for (const db of databases) {
    await db.sql.end({ timeout: 5 });
    await admin.unsafe(`drop database if exists "${db.name}" with (force)`);
  }
  await admin.end({ timeout: 5 });
  await server.stop();
}
