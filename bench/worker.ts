/**
 * `npm run bench -- worker [--events 20000] [--history 1000000] [--workers 4]`
 *
 * How fast the worker drains a backlog, measured the way production meets one: the rows
 * arrive through the ingest handler (1 KiB payloads, 500-record MSK batches) after the
 * last ANALYZE, and are drained by the worker function itself, `functions/worker/handler.ts`,
 * each worker in its own process configured only by its environment. Nothing in a measured
 * scenario runs ANALYZE or VACUUM; the "analyzed" references run ANALYZE after the backlog
 * arrived, before the clock starts, to show what fresh statistics would give.
 *
 * Scenarios, each in its own database on one server, side by side in one run:
 *   empty history        fresh tables, never analyzed (as after a deploy)
 *   1M finished rows     --history finished rows, analyzed while nothing was due (a healthy
 *                        inbox's normal state), then the backlog
 *   uniform / hot        status changes of existing cases: --events cases × 1 event, against
 *                        20 cases × (--events / 20) versions in order
 *   traced               the empty-history backlog with tracing on: the OpenTelemetry SDK
 *                        exporting OTLP/HTTP (protobuf) to a receiver on this machine, a span
 *                        per row in its producer's trace (every record carries a traceparent)
 *   N workers            the empty-history backlog drained by --workers processes at once
 *   graphile-worker      the peer, same server: --events no-op jobs with the same payloads,
 *                        its batched mode (local queue 500, concurrency 10)
 *
 * Beside events/s (which depend on the machine) it prints figures that do not: statements,
 * buffers and WAL bytes per event (pg_stat_statements, when the server has it), and how
 * often a backend waited for a lock while the workers ran (pg_stat_activity sampled every
 * few milliseconds: claims that wait for each other would show here).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import postgres from 'postgres';
import { getConsumer } from '../functions/consumers';
import { workerRoleOf } from '../functions/lib/database-roles';
import { createIngestHandler } from '../functions/ingest/ingest';
import { roleUrl } from '../tools/database-roles';
import { mskEvent, spreadRecords } from '../tools/msk-events';
import { startOtlpReceiver } from '../tools/otlp-receiver';
import { createBenchDatabase, dropBenchDatabase, type BenchDatabase } from './_databases';
import { accepted as acceptedEvent, filler, type Envelope } from './_events';
import { graphilePeer } from './_graphile';
import { benchServer } from './_server';

process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '20000' },
    history: { type: 'string', default: '1000000' },
    workers: { type: 'string', default: '4' },
  },
});
const EVENTS = Number(args.events);
const HISTORY = Number(args.history);
const WORKERS = Number(args.workers);
const HOT_AGGREGATES = 20;
const TOPIC = 'regulatory.case.events.v1';
const consumer = getConsumer('case-projection');
const quiet = {
  logger: new Logger({ serviceName: 'bench', logLevel: 'SILENT' }),
  metrics: new Metrics({ namespace: 'Bench', serviceName: 'bench' }),
};

const server = await benchServer({
  shared_preload_libraries: 'pg_stat_statements',
  'pg_stat_statements.track': 'top',
  max_wal_size: '4GB',
});
const admin = postgres(server.url, { max: 1, onnotice: () => {} });
// pg_stat_statements' view is read from the admin database; a server without the module
// gives no per-event figures (the rates are still printed).
await admin`create extension if not exists pg_stat_statements`.catch(() => {});
const run = randomBytes(3).toString('hex');
let databases = 0;

type Database = BenchDatabase;

const database = (template?: string): Promise<Database> =>
  createBenchDatabase(admin, server.url, `bench_worker_${run}_${++databases}`, template);

const drop = (db: Database): Promise<void> => dropBenchDatabase(admin, db);

/** Store `envelopes` through the ingest handler, 500 records per MSK batch over 8 partitions. */
async function ingest(db: Database, envelopes: Envelope[]): Promise<void> {
  const handler = createIngestHandler({ sql: db.sql, consumer, config: { maxPayloadBytes: 256 * 1024 }, ...quiet });
  const records = spreadRecords({
    topic: TOPIC,
    partitions: 8,
    count: envelopes.length,
    value: (n) => envelopes[n]!,
    // A traced producer's context on every record: the traced drain's row spans join its trace.
    headers: (n) => ({ traceparent: `00-${(n + 1).toString(16).padStart(32, '0')}-00f067aa0ba902b7-01` }),
  });
  for (let i = 0; i < records.length; i += 500) {
    const r = await handler(mskEvent(records.slice(i, i + 500)), { awsRequestId: `bench-${i}` });
    if (r.batchItemFailures.length > 0) throw new Error('ingest reported batch item failures');
  }
}

const accepted = (n: number, caseId?: string): Envelope => acceptedEvent(run, n, caseId);

function statusChanged(caseId: string, version: number): Envelope {
  return {
    eventId: `evt_${run}_${randomBytes(8).toString('hex')}`,
    eventType: 'regulatory.case.status-changed.v1',
    eventVersion: 1,
    occurredAt: '2026-07-03T09:15:30Z',
    producer: 'case-command-service',
    aggregateType: 'case',
    aggregateId: caseId,
    aggregateVersion: version,
    payload: filler({ caseId, newStatus: `S${version}` }),
  };
}

interface Usage {
  statements: number;
  buffers: number;
  walBytes: number;
}

async function usage(db: Database): Promise<Usage | undefined> {
  try {
    const [u] = await admin<{ statements: string; buffers: string; wal: string }[]>`
      select coalesce(sum(calls), 0)::text as statements,
             coalesce(sum(shared_blks_hit + shared_blks_read), 0)::text as buffers,
             coalesce(sum(wal_bytes), 0)::text as wal
      from pg_stat_statements
      where dbid = (select oid from pg_database where datname = ${db.name})`;
    return { statements: Number(u!.statements), buffers: Number(u!.buffers), walBytes: Number(u!.wal) };
  } catch {
    return undefined; // a server without pg_stat_statements
  }
}

/** What a scenario cost between two readings of usage(); undefined without pg_stat_statements. */
function usageBetween(before: Usage | undefined, after: Usage | undefined): Usage | undefined {
  if (before === undefined || after === undefined) return undefined;
  return {
    statements: after.statements - before.statements,
    buffers: after.buffers - before.buffers,
    walBytes: after.walBytes - before.walBytes,
  };
}

/** Sample pg_stat_activity while `during` runs: how often a backend of `db` waited for a lock. */
async function lockWaits<T>(db: Database, during: Promise<T>): Promise<{ result: T; samples: number; waiting: number }> {
  const sampler = postgres(server.url, { max: 1, onnotice: () => {} });
  let done = false;
  let samples = 0;
  let waiting = 0;
  const sampling = (async () => {
    while (!done) {
      const [s] = await sampler<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where datname = ${db.name} and wait_event_type = 'Lock'`;
      samples += 1;
      if (s!.n > 0) waiting += 1;
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  try {
    const result = await during;
    return { result, samples, waiting };
  } finally {
    done = true;
    await sampling;
    await sampler.end({ timeout: 5 });
  }
}

const workerScript = fileURLToPath(new URL('./_worker-process.ts', import.meta.url));

/** Drain `db` with `n` worker processes; resolves to seconds from "go" to the last one done. */
async function drain(db: Database, n: number, env: Record<string, string> = {}): Promise<{ seconds: number; processed: number }> {
  const children: ChildProcess[] = [];
  try {
    const ready: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const child = fork(workerScript, [], {
        execArgv: ['--import', 'tsx'],
        env: {
          ...process.env,
          // As in AWS, the worker connects as its consumer's own role (row security and all).
          DATABASE_URL: roleUrl(server.url, workerRoleOf(consumer), db.name),
          CONSUMER_NAME: consumer.name,
          POWERTOOLS_METRICS_DISABLED: 'true',
          POWERTOOLS_LOG_LEVEL: 'SILENT',
          LOG_LEVEL: 'SILENT',
          DB_POOL_MAX: '2',
          // A drain, measured until the backlog is gone: a worker stops at its first empty
          // claim instead of staying awake for traffic (WORKER_IDLE_MS), and wakes no other
          // (there is no Lambda service here; the --workers processes are the fan-out).
          WORKER_IDLE_MS: '0',
          WAKE_UPS: 'false',
          ...env,
        },
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      });
      children.push(child);
      ready.push(
        new Promise((resolve, reject) => {
          child.once('message', () => resolve());
          child.once('exit', (code) => reject(new Error(`worker process exited with ${code} before it was ready`)));
        }),
      );
    }
    await Promise.all(ready);
    const started = performance.now();
    const totals = await Promise.all(
      children.map(
        (child) =>
          new Promise<{ processed: number }>((resolve, reject) => {
            child.once('message', (m) => resolve(m as { processed: number }));
            child.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`worker process exited with ${code}`))));
            child.send('go');
          }),
      ),
    );
    return { seconds: (performance.now() - started) / 1000, processed: totals.reduce((s, t) => s + t.processed, 0) };
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill();
  }
}

interface Figure {
  label: string;
  events: number;
  seconds: number;
  usage?: Usage | undefined;
  lockWaitShare?: number;
}

const figures: Figure[] = [];
const LABEL_WIDTH = 62;

/**
 * What every drain starts from, ours and the peer's, whatever its statistics: the ingest's
 * dirty pages written out (no checkpoint falls inside one scenario and not another) and the
 * queue's table read once. ANALYZE reads every page of a 20,000-row table and sets its hint
 * bits, so without the read the analyzed references would be spared those writes, a
 * difference that has nothing to do with plans. Neither changes what the planner knows.
 */
async function settle(db: Database, table: string): Promise<void> {
  await admin`checkpoint`;
  await db.sql.unsafe(`select count(*) from ${table}`);
}

async function measure(label: string, db: Database, events: number, workers: number, env: Record<string, string> = {}): Promise<Figure> {
  await settle(db, 'integration.consumer_inbox');
  const before = await usage(db);
  const { result, samples, waiting } = await lockWaits(db, drain(db, workers, env));
  const after = await usage(db);
  if (result.processed !== events) throw new Error(`${label}: processed ${result.processed} of ${events}`);
  const [left] = await db.sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_inbox where status <> 'PROCESSED'`;
  if (left!.n !== 0) throw new Error(`${label}: ${left!.n} rows not PROCESSED`);
  const figure: Figure = {
    label,
    events,
    seconds: result.seconds,
    usage: usageBetween(before, after),
    lockWaitShare: samples > 0 ? waiting / samples : 0,
  };
  figures.push(figure);
  const rate = Math.round(events / figure.seconds);
  const u = figure.usage;
  console.log(
    `  ${label.padEnd(LABEL_WIDTH)} ${rate.toString().padStart(7)} events/s` +
      (u
        ? `   ${(u.statements / events).toFixed(3)} stmt   ${(u.buffers / events).toFixed(1)} buf   ${Math.round(u.walBytes / events)} WAL B   /event`
        : '') +
      `   lock waits ${(100 * (figure.lockWaitShare ?? 0)).toFixed(1)}% of samples`,
  );
  return figure;
}

const rate = (f: Figure) => f.events / f.seconds;
const ratio = (a: Figure, b: Figure) => (rate(a) / rate(b)).toFixed(2);

try {
  console.log(`\nworker benchmark: ${EVENTS} events, 1 KiB payloads, stored through the ingest handler; drained by worker processes`);
  const template = await database();
  await template.sql.end({ timeout: 5 });

  // Empty history: never analyzed, and the same backlog with fresh statistics.
  const envelopes = Array.from({ length: EVENTS }, (_, n) => accepted(n));
  const empty = await database(template.name);
  await ingest(empty, envelopes);
  const emptyStale = await measure('empty history, stale statistics, 1 worker', empty, EVENTS, 1);
  await drop(empty);
  const emptyFresh = await database(template.name);
  await ingest(emptyFresh, envelopes);
  await emptyFresh.sql`analyze`;
  const emptyAnalyzed = await measure('empty history, analyzed, 1 worker', emptyFresh, EVENTS, 1);
  await drop(emptyFresh);

  // Tracing on: spans exported over OTLP/HTTP, flushed before each invocation returns.
  const receiver = await startOtlpReceiver();
  const traced = await database(template.name);
  await ingest(traced, envelopes);
  const tracedFigure = await measure('empty history, stale statistics, 1 worker, traced', traced, EVENTS, 1, {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  });
  const exports = receiver.received.length;
  await receiver.close();
  await drop(traced);

  // A million finished rows, analyzed while nothing was due.
  const historyTemplate = await database(template.name);
  await historyTemplate.sql`
    insert into integration.consumer_inbox (
      consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, aggregate_version,
      topic_name, partition_no, offset_no, producer, occurred_at, received_at, status, attempt_count,
      processed_at, payload, payload_purged_at)
    select ${consumer.name}, 'old_' || n, 'regulatory.case.accepted.v1', 1, 'case', 'old_case_' || n, 1,
           ${TOPIC}, n % 8, n / 8, 'case-command-service', now() - interval '20 days', now() - make_interval(secs => 1728000 - n),
           'PROCESSED', 1, now() - make_interval(secs => 1728000 - n), '{}'::jsonb,
           case when n < ${Math.floor(HISTORY * 0.75)} then now() - interval '1 day' end
    from generate_series(1, ${HISTORY}) as n`;
  await historyTemplate.sql`vacuum analyze`;
  await historyTemplate.sql.end({ timeout: 5 });
  const history = await database(historyTemplate.name);
  await ingest(history, envelopes);
  const historyStale = await measure(`${HISTORY.toLocaleString('en-US')} finished rows, stale statistics, 1 worker`, history, EVENTS, 1);
  await drop(history);
  const historyFresh = await database(historyTemplate.name);
  await ingest(historyFresh, envelopes);
  await historyFresh.sql`analyze`;
  const historyAnalyzed = await measure(`${HISTORY.toLocaleString('en-US')} finished rows, analyzed, 1 worker`, historyFresh, EVENTS, 1);
  await drop(historyFresh);
  await admin.unsafe(`drop database "${historyTemplate.name}"`);

  // Uniform and hot aggregates: the same handler (one UPDATE per status change) either way.
  const perHot = Math.floor(EVENTS / HOT_AGGREGATES);
  const uniform = await database(template.name);
  await uniform.sql`
    insert into read_model.case_summary (case_id, case_status, last_aggregate_version)
    select 'case_' || n, 'S1', 1 from generate_series(0, ${EVENTS - 1}) n`;
  await ingest(
    uniform,
    Array.from({ length: EVENTS }, (_, n) => statusChanged(`case_${n}`, 2)),
  );
  const uniformFigure = await measure(`uniform: ${EVENTS} cases × 1 status change, 1 worker`, uniform, EVENTS, 1);
  await drop(uniform);
  const hot = await database(template.name);
  await hot.sql`
    insert into read_model.case_summary (case_id, case_status, last_aggregate_version)
    select 'hot_' || n, 'S1', 1 from generate_series(0, ${HOT_AGGREGATES - 1}) n`;
  // In version order per case, the cases interleaved (as one partition per case would deliver them).
  await ingest(
    hot,
    Array.from({ length: HOT_AGGREGATES * perHot }, (_, n) =>
      statusChanged(`hot_${n % HOT_AGGREGATES}`, Math.floor(n / HOT_AGGREGATES) + 2),
    ),
  );
  const hotFigure = await measure(`hot: ${HOT_AGGREGATES} cases × ${perHot} status changes, 1 worker`, hot, HOT_AGGREGATES * perHot, 1);
  const [hotState] = await hot.sql<{ ok: boolean }[]>`
    select bool_and(last_aggregate_version = ${perHot + 1}) as ok from read_model.case_summary where case_id like 'hot_%'`;
  if (!hotState!.ok) throw new Error('hot: not every case reached its last version');
  await drop(hot);

  // Several workers on one consumer.
  const many = await database(template.name);
  await ingest(many, envelopes);
  const manyFigure = await measure(`empty history, stale statistics, ${WORKERS} workers`, many, EVENTS, WORKERS);
  await drop(many);

  // The peer.
  const peerDb = await database();
  const peer = await graphilePeer(peerDb.url);
  let peerFigure: Figure;
  try {
    await peer.add(
      envelopes.map((e) => e.payload),
      500,
    );
    await settle(peerDb, 'graphile_worker._private_jobs');
    const before = await usage(peerDb);
    const seconds = await peer.drain({ concurrency: 10, localQueue: 500 });
    const after = await usage(peerDb);
    peerFigure = {
      label: 'graphile-worker 0.17 batched (local queue 500, concurrency 10)',
      events: EVENTS,
      seconds,
      usage: usageBetween(before, after),
    };
    const u = peerFigure.usage;
    console.log(
      `  ${peerFigure.label.padEnd(LABEL_WIDTH)} ${Math.round(rate(peerFigure)).toString().padStart(7)} jobs/s  ` +
        (u
          ? `     ${(u.statements / EVENTS).toFixed(3)} stmt   ${(u.buffers / EVENTS).toFixed(1)} buf   ${Math.round(u.walBytes / EVENTS)} WAL B   /job`
          : ''),
    );
  } finally {
    await peer.release();
    await drop(peerDb);
  }
  await admin.unsafe(`drop database "${template.name}"`);

  console.log('\n  ratios (aims in brackets)');
  const line = (name: string, value: string, aim = '') => console.log(`    ${name.padEnd(44)} ${value}${aim ? `   (${aim})` : ''}`);
  line('stale / analyzed, empty history', ratio(emptyStale, emptyAnalyzed), '≥ 0.9');
  line(`stale / analyzed, ${HISTORY.toLocaleString('en-US')} finished rows`, ratio(historyStale, historyAnalyzed), '≥ 0.9');
  line('hot / uniform', ratio(hotFigure, uniformFigure), '≥ 0.8');
  line('traced / untraced, 1 worker', `${ratio(tracedFigure, emptyStale)}   (${exports} OTLP exports received)`);
  line(`${WORKERS} workers / graphile-worker batched`, ratio(manyFigure, peerFigure), '≥ 0.5');
  line('1 worker / graphile-worker batched', ratio(emptyStale, peerFigure));
  line(`${WORKERS} workers / 1 worker`, ratio(manyFigure, emptyStale));
} finally {
  await admin.end({ timeout: 5 });
  await server.stop();
}
