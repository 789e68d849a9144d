/**
 * `npm run bench -- fleet [--events 5000] [--invocations 3]`
 *
 * What each consumer of a large stage costs besides its events (docs/capacity.md, "A stage
 * of fifty consumers"), measured on the functions themselves, each in its own process as a
 * Lambda container, configured only by its environment, as its own database role:
 *
 *   idle      per idle consumer per hour (the schedule invokes its worker every minute):
 *             statements (pg_stat_statements, by the function's role), invocations, and
 *             seconds awake. "Before" is a worker invocation awake for its idle interval,
 *             what every scheduled invocation did (a woken one still does, by design);
 *             "after" is the scheduled invocation as it is. Beside it the idle relay of an
 *             emitting consumer, and the reaper's share per consumer.
 *   logs      bytes written to the function logs (CloudWatch Logs ingests them) per processed
 *             event, ingest and worker, at INFO and at DEBUG (every event's line: what INFO
 *             wrote before the worker logged by the batch), and the EMF documents of the
 *             metrics beside them.
 *
 * Figures that do not depend on the machine (statements, bytes, invocations), except the
 * seconds awake, which the idle interval dominates.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { reserveWakeUp } from '../functions/wings/wake-ups/wake-up-gate';
import { DatabaseRoles, ingestRoleOf, relayRoleOf, workerRoleOf, type DatabaseRole } from '../functions/lib/database-roles';
import { roleUrl } from '../tools/database-roles';
import { freePort } from '../tools/embedded-postgres';
import { mskEvent, spreadRecords } from '../tools/msk-events';
import { createBenchDatabase, dropBenchDatabase, type BenchDatabase } from './_databases';
import { accepted } from './_events';
import { functionEntry } from '../tools/bundle';
import { startFunction, type FunctionProcess } from './_function-process';
import { benchServer } from './_server';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '5000' },
    invocations: { type: 'string', default: '3' },
  },
});
const EVENTS = Number(args.events);
const INVOCATIONS = Number(args.invocations);
const CONSUMER = 'case-projection';
const EMITTING = 'case-sla';
const TOPIC = 'regulatory.case.events.v1';
/** The schedules' rate: a minute. */
const PER_HOUR = 60;
const FIFTY = 50;

const server = await benchServer({ shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'top' });
const admin = postgres(server.url, { max: 1, onnotice: () => {} });
await admin`create extension if not exists pg_stat_statements`;
const run = randomBytes(3).toString('hex');
let databases = 0;
const database = (template?: string) => createBenchDatabase(admin, server.url, `bench_fleet_${run}_${++databases}`, template);

/** What every function process gets: its role's URL, the pool the CDK app gives it, quiet Powertools unless asked. */
function environment(db: BenchDatabase, role: DatabaseRole, env: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: roleUrl(server.url, role, db.name),
    DB_POOL_MAX: '1',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
    WAKE_UPS: 'false',
    ...env,
  };
}

/** Statements `role` ran in `db` so far (top level, as pg_stat_statements counts them). */
async function statementsOf(db: BenchDatabase, role: DatabaseRole): Promise<number> {
  const [row] = await admin<{ n: string }[]>`
    select coalesce(sum(calls), 0)::text as n from pg_stat_statements
    where dbid = (select oid from pg_database where datname = ${db.name})
      and userid = (select oid from pg_roles where rolname = ${role})`;
  return Number(row!.n);
}

interface Idle {
  label: string;
  statements: number;
  invocations: number;
  awakeMs: number;
}

/** `invoke` run INVOCATIONS times against an idle consumer: per invocation, what `role` ran and how long it was awake. */
async function idleRuns(label: string, db: BenchDatabase, role: DatabaseRole, invoke: () => Promise<number>): Promise<Idle> {
  // A first invocation opens the container's connection: steady state is what the hour is made of.
  await invoke();
  const before = await statementsOf(db, role);
  let awakeMs = 0;
  for (let i = 0; i < INVOCATIONS; i++) awakeMs += await invoke();
  return { label, statements: ((await statementsOf(db, role)) - before) / INVOCATIONS, invocations: 1, awakeMs: awakeMs / INVOCATIONS };
}

async function idleConsumer(): Promise<Idle[]> {
  const db = await database();
  try {
    // Idle, not empty: a finished row, and one backing off for an hour.
    await db.sql`
      insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id,
        topic_name, partition_no, offset_no, producer, occurred_at, status, attempt_count, next_attempt_at, processed_at, payload)
      values (${CONSUMER}, 'evt_done', 'regulatory.case.accepted.v1', 1, 'case', 'case_done', ${TOPIC}, 0, 1, 'p', now(), 'PROCESSED', 1, null, now(), '{}'),
             (${CONSUMER}, 'evt_later', 'regulatory.case.accepted.v1', 1, 'case', 'case_later', ${TOPIC}, 0, 2, 'p', now(), 'RETRY_PENDING', 1, now() + interval '1 hour', null, '{}')`;
    const workerRole = workerRoleOf({ name: CONSUMER });
    const worker = await startFunction(await functionEntry('worker', CONSUMER), environment(db, workerRole, { CONSUMER_NAME: CONSUMER }));
    const relayRole = relayRoleOf({ name: EMITTING });
    const relay = await startFunction(
      await functionEntry('relay', EMITTING),
      environment(db, relayRole, {
        CONSUMER_NAME: EMITTING,
        // Nothing to publish: the producer never connects.
        KAFKA_BROKERS: `127.0.0.1:${await freePort()}`,
        AWS_REGION: 'eu-west-1',
        AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
        AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
      }),
    );
    const reaper = await startFunction(await functionEntry('reaper'), environment(db, DatabaseRoles.reaper));
    try {
      const ms = async (p: FunctionProcess, event: unknown) => (await p.invoke(event)).ms;
      const after = await idleRuns('worker, scheduled (after)', db, workerRole, () => ms(worker, { source: 'schedule' }));
      // Before: awake for the idle interval, taking a slot and leaving it, polling every 250 ms.
      // A woken invocation runs that path: reserve it a slot, as the ingest's gate does.
      const before = await idleRuns('worker, awake for its idle interval (before)', db, workerRole, async () => {
        const gate = await reserveWakeUp(db.sql, CONSUMER, `wake-up:bench:${randomBytes(4).toString('hex')}`, 10);
        if (gate === 'paused' || gate === 'closed') throw new Error(`the gate was ${gate}`);
        const invitation = (
          await db.sql<{ held_by: string }[]>`
          select held_by from integration.consumer_worker_slot where consumer_name = ${CONSUMER} and slot_no = ${gate.slotNo}`
        )[0]!.held_by;
        return ms(worker, { source: 'wake-up', consumerName: CONSUMER, slot: gate.slotNo, invitation });
      });
      const relayIdle = await idleRuns('relay of an emitting consumer', db, relayRole, () => ms(relay, { source: 'schedule' }));
      const reaperRun = await idleRuns('reaper (the stage), per consumer', db, DatabaseRoles.reaper, () =>
        ms(reaper, { source: 'schedule' }),
      );
      const consumers = (await db.sql<{ n: number }[]>`select count(distinct consumer_name)::int as n from integration.consumer_role`)[0]!
        .n;
      return [before, after, relayIdle, { ...reaperRun, statements: reaperRun.statements / consumers, invocations: 1 / consumers }];
    } finally {
      await Promise.all([worker.close(), relay.close(), reaper.close()]);
    }
  } finally {
    await dropBenchDatabase(admin, db);
  }
}

interface LogBytes {
  level: string;
  events: number;
  ingest: number;
  worker: number;
  emf: number;
}

/** Bytes of log lines and of EMF documents among `lines`. */
function sizes(lines: readonly string[]): { log: number; emf: number } {
  let log = 0;
  let emf = 0;
  for (const line of lines) {
    const bytes = Buffer.byteLength(line, 'utf8') + 1;
    if (line.includes('"_aws"')) emf += bytes;
    else log += bytes;
  }
  return { log, emf };
}

/** EVENTS accepted events stored by the ingest function and processed by the worker, both logging at `level`. */
async function logBytes(template: string, level: 'INFO' | 'DEBUG'): Promise<LogBytes> {
  const db = await database(template);
  const logging = { POWERTOOLS_LOG_LEVEL: level, POWERTOOLS_METRICS_DISABLED: 'false', POWERTOOLS_METRICS_NAMESPACE: 'Bench' };
  const ingest = await startFunction(
    await functionEntry('ingest', CONSUMER),
    environment(db, ingestRoleOf({ name: CONSUMER }), { CONSUMER_NAME: CONSUMER, ...logging }),
  );
  const worker = await startFunction(
    await functionEntry('worker', CONSUMER),
    environment(db, workerRoleOf({ name: CONSUMER }), { CONSUMER_NAME: CONSUMER, WORKER_IDLE_MS: '0', ...logging }),
  );
  try {
    const records = spreadRecords({ topic: TOPIC, partitions: 8, count: EVENTS, value: (n) => accepted(run, n) });
    for (let i = 0; i < records.length; i += 500) await ingest.invoke(mskEvent(records.slice(i, i + 500)));
    let processed = 0;
    for (;;) {
      const { result } = await worker.invoke<{ processed: number; claimed: number }>({ source: 'schedule' });
      processed += result.processed;
      if (result.claimed === 0) break;
    }
    if (processed !== EVENTS) throw new Error(`processed ${processed} of ${EVENTS}`);
    const [i, w] = [sizes(await ingest.drainLog()), sizes(await worker.drainLog())];
    return { level, events: EVENTS, ingest: i.log, worker: w.log, emf: i.emf + w.emf };
  } finally {
    await Promise.all([ingest.close(), worker.close()]);
    await dropBenchDatabase(admin, db);
  }
}

const n = (x: number, digits = 0) => x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

try {
  console.log(
    `\nfleet benchmark: an idle consumer's hour (${INVOCATIONS} invocations each, after a first), and log bytes per event (${n(EVENTS)} events)`,
  );
  const idle = await idleConsumer();
  console.log('\n  per idle consumer per hour (the schedule: every minute)    statements   invocations   seconds awake');
  for (const r of idle) {
    console.log(
      `  ${r.label.padEnd(58)} ${n(r.statements * PER_HOUR).padStart(10)}   ${n(r.invocations * PER_HOUR, 1).padStart(11)}   ${n((r.awakeMs * PER_HOUR) / 1000, 1).padStart(13)}`,
    );
  }
  const [before, after] = idle;
  console.log(
    `\n  worker statements per idle consumer per hour, after / before: ${n(after!.statements / before!.statements, 3)}` +
      `   (at ${FIFTY} consumers: ${n(before!.statements * PER_HOUR * FIFTY)} → ${n(after!.statements * PER_HOUR * FIFTY)} an hour)`,
  );

  const template = await database();
  await template.sql.end({ timeout: 5 });
  const results = [await logBytes(template.name, 'INFO'), await logBytes(template.name, 'DEBUG')];
  await admin.unsafe(`drop database "${template.name}"`);
  console.log('\n  log bytes per processed event                 ingest    worker   log total   EMF (metrics)');
  for (const r of results) {
    const label = r.level === 'INFO' ? 'INFO (after: one line a batch)' : 'DEBUG (every event: INFO before)';
    console.log(
      `  ${label.padEnd(44)} ${n(r.ingest / r.events, 1).padStart(7)}   ${n(r.worker / r.events, 1).padStart(7)}   ${n((r.ingest + r.worker) / r.events, 1).padStart(9)}   ${n(r.emf / r.events, 1).padStart(13)}`,
    );
  }
  const [info, debug] = results;
  console.log(`\n  log bytes per event, INFO / DEBUG: ${n((info!.ingest + info!.worker) / (debug!.ingest + debug!.worker), 3)}`);
} finally {
  await admin.end({ timeout: 5 });
  await server.stop();
}
