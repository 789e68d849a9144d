/**
 * `npm run bench -- worker [--events 20000] [--batch 100] [--workers 1,4] [--rounds 1]`
 *
 * Events per second drained by runWorker for case-projection `accepted` events, with 1 and
 * with 4 concurrent workers (each on its own client, as separate Lambda containers), and
 * the statements sent per event (counted with postgres.js's debug hook; statements issued
 * together are pipelined, so round trips are fewer — see docs/worker.md).
 *
 * Logging is SILENT and metrics are disabled, so the figure is the worker's own cost.
 * Figures are as measured on a shared machine: compare ratios, not absolutes.
 */
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import postgres from 'postgres';
import { getConsumer } from '../functions/consumers';
import { TYPES, type Sql } from '../functions/lib/db';
import { loadMigrations, migrate, MIGRATIONS_DIR } from '../functions/lib/migrate';
import { newOwnerId, runWorker, type WorkerResult } from '../functions/worker/run-worker';
import { benchServer } from './_server';

process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '20000' },
    batch: { type: 'string', default: '100' },
    workers: { type: 'string', default: '1,4' },
    rounds: { type: 'string', default: '1' },
  },
});
const EVENTS = Number(args.events);
const BATCH = Number(args.batch);
const WORKER_COUNTS = args.workers.split(',').map(Number);
const ROUNDS = Number(args.rounds);
const consumer = getConsumer('case-projection');

const server = await benchServer();
const url = server.url;
const sql = postgres(url, { max: 2, onnotice: () => {}, types: TYPES }) as unknown as Sql;

async function arrange(): Promise<void> {
  await sql`truncate integration.consumer_inbox, read_model.case_summary`;
  // Server-side rows with the shape ingest stores (arrival order = offset order).
  await sql`
    insert into integration.consumer_inbox (
      consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id,
      topic_name, partition_no, offset_no, correlation_id, producer, occurred_at, received_at, status, payload)
    select 'case-projection', 'evt_' || lpad(n::text, 9, '0'), 'regulatory.case.accepted.v1', 1, 'case', 'case_' || n,
           'regulatory.case.events.v1', n % 8, n / 8, 'corr_' || n, 'case-command-service',
           '2026-07-03T09:15:30Z', now() - make_interval(secs => ${EVENTS} - n) / 1000, 'RECEIVED',
           jsonb_build_object('caseId', 'case_' || n, 'acceptedAt', '2026-07-03T09:15:30Z')
    from generate_series(1, ${EVENTS}) as n`;
  await sql`vacuum analyze integration.consumer_inbox`;
}

interface Run {
  seconds: number;
  statements: number;
  results: WorkerResult[];
}

async function drain(workers: number): Promise<Run> {
  let statements = 0;
  const clients = Array.from(
    { length: workers },
    () => postgres(url, { max: 1, onnotice: () => {}, types: TYPES, debug: () => void statements++ }) as unknown as Sql,
  );
  try {
    await Promise.all(clients.map((c) => c`select 1`)); // connect outside the timing
    statements = 0;
    const started = performance.now();
    const results = await Promise.all(
      clients.map((client) =>
        runWorker({
          sql: client,
          consumer,
          config: { worker: { batchSize: BATCH, safetyMarginMs: 1_000, leaseSeconds: 300 } },
          logger: new Logger({ serviceName: 'bench', logLevel: 'SILENT' }),
          metrics: new Metrics({ namespace: 'Bench', serviceName: 'bench' }),
          owner: newOwnerId('bench'),
          remainingMs: () => 600_000,
        }),
      ),
    );
    return { seconds: (performance.now() - started) / 1000, statements, results };
  } finally {
    await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
  }
}

try {
  await migrate(sql, await loadMigrations(MIGRATIONS_DIR));
  // Warm up (JIT, plans, buffers).
  await arrange();
  await drain(1);

  console.log(`\nworker benchmark: ${EVENTS} case-projection accepted events, batch ${BATCH}, best of ${ROUNDS}`);
  for (const workers of WORKER_COUNTS) {
    let best: Run | undefined;
    for (let round = 0; round < ROUNDS; round++) {
      await arrange();
      const run = await drain(workers);
      const [counts] = await sql<{ processed: number; summaries: number }[]>`
        select (select count(*)::int from integration.consumer_inbox where status = 'PROCESSED') as processed,
               (select count(*)::int from read_model.case_summary) as summaries`;
      if (counts?.processed !== EVENTS || counts.summaries !== EVENTS) {
        throw new Error(`${workers} workers: ${counts?.processed} PROCESSED, ${counts?.summaries} case_summary rows; expected ${EVENTS}`);
      }
      if (best === undefined || run.seconds < best.seconds) best = run;
    }
    const claimed = best!.results.map((r) => r.claimed);
    console.log(
      `  ${String(workers).padStart(2)} worker(s): ${Math.round(EVENTS / best!.seconds).toString().padStart(6)} events/s` +
        `   ${(best!.statements / EVENTS).toFixed(3)} statements/event` +
        `   (${best!.seconds.toFixed(2)} s; per worker ${claimed.join(' / ')})`,
    );
  }
  console.log('\n  per batch: claim = BEGIN, [claim lock + claim] pipelined, COMMIT;');
  console.log('             process = BEGIN, fence, SAVEPOINT, one set-based upsert, RELEASE, completion, COMMIT');
} finally {
  await sql.end({ timeout: 5 });
  await server.stop();
}
