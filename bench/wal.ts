/**
 * `npm run bench -- wal [--events 20000] [--batch 500] [--by-type] [--fillfactor N]`
 *
 * --by-type adds each phase's WAL by record type (pg_walinspect), per event.
 * --fillfactor sets the inbox's fillfactor first, for an experiment (the migrations' choice
 * otherwise; docs/capacity.md weighs it against bytes per row).
 *
 * WAL bytes per event over an event's whole life, ours beside graphile-worker's, on the
 * same server in the same run, the same 1 KiB payloads:
 *
 *   ours   ingest   the ingest handler, 500-record MSK batches (case-projection accepted)
 *          process  one worker (runWorker) drains them: claim, the projection upsert,
 *                   completion
 *          leave    the reaper moves finished rows out of the inbox once the payload
 *                   retention has passed: the row deleted, its key inserted into
 *                   integration.consumed_events
 *          forget   the reaper deletes the keys once the dedupe window has passed
 *   peer   add      addJobs in 500s (no-op task, the payload as the job's payload)
 *          run      its batched worker (local queue 500, concurrency 10); it deletes a
 *                   job when it completes
 *          cleanup  its own GC tasks
 *
 * A CHECKPOINT before each phase, so both sides pay full-page images the same way (see
 * bench/_wal.ts). WAL bytes do not change from machine to machine: these are the figures
 * to compare. The embedded server runs with full_page_writes on (production's setting)
 * and autovacuum off, so that nothing but the phase writes while it is measured.
 *
 * Retention: the reaper's statements run with a policy whose payload retention has passed
 * (0 days) instead of waiting a week, the same SQL over the same rows. The keys' window
 * ends before `forget` by moving their dedupe_until, then VACUUM, both before the phase's
 * CHECKPOINT and unmeasured: a month-old key has long been vacuumed.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import postgres from 'postgres';
import { getConsumer } from '../functions/consumers';
import type { RetentionPolicy } from '../functions/framework/types';
import { createIngestHandler } from '../functions/ingest/ingest';
import type { KafkaEvent } from '../functions/ingest/types';
import { deleteExpiredKeys, retireFinished } from '../functions/inbox/purge';
import { TYPES, type Sql } from '../functions/lib/db';
import { migrate } from '../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../functions/lib/migration-files';
import { newOwnerId, runWorker } from '../functions/worker/run-worker';
import { mskEvent, spreadRecords } from '../tools/msk-events';
import { graphilePeer } from './_graphile';
import { benchServer } from './_server';
import { byTypePerEvent, perEvent, walMeter, type Wal } from './_wal';

process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';

const { values: args } = parseArgs({
  options: {
    events: { type: 'string', default: '20000' },
    batch: { type: 'string', default: '500' },
    'by-type': { type: 'boolean', default: false },
    fillfactor: { type: 'string' },
  },
});
const EVENTS = Number(args.events);
const BATCH = Number(args.batch);
const TOPIC = 'regulatory.case.events.v1';
const consumer = getConsumer('case-projection');
const REAPER_BATCH = 1000;

/**
 * A 1 KiB JSON payload whose filler is random (base64 of random bytes): real payloads are
 * not a kilobyte of one repeated character, and a compressible filler would let
 * PostgreSQL's TOAST compression hide the cost of storing it.
 */
function payloadOf(n: number): Record<string, string> {
  const payload = { caseId: `case_${n}`, acceptedAt: '2026-07-03T09:15:30Z', note: '' };
  const room = 1024 - JSON.stringify(payload).length;
  payload.note = randomBytes(room).toString('base64').slice(0, room);
  return payload;
}

const payloads = Array.from({ length: EVENTS }, (_, n) => payloadOf(n));

function envelope(n: number) {
  return {
    eventId: `evt_${randomBytes(16).toString('hex')}`,
    eventType: 'regulatory.case.accepted.v1',
    eventVersion: 1,
    occurredAt: '2026-07-03T09:15:30Z',
    producer: 'case-command-service',
    correlationId: `corr_${n}`,
    aggregateType: 'case',
    aggregateId: payloads[n]!.caseId,
    partitionKey: payloads[n]!.caseId,
    payload: payloads[n],
  };
}

const server = await benchServer({ full_page_writes: 'on', autovacuum: 'off', max_wal_size: '4GB' });
const sql = postgres(server.url, { max: 4, onnotice: () => {}, types: TYPES }) as unknown as Sql;
const quietLogger = new Logger({ serviceName: 'bench', logLevel: 'SILENT' });
const metrics = new Metrics({ namespace: 'Bench', serviceName: 'bench' });

function line(label: string, wal: Wal): string {
  const types =
    args['by-type'] && wal.byType.length > 0
      ? byTypePerEvent(wal, EVENTS)
          .map((t) => `\n        ${t}`)
          .join('')
      : '';
  return `    ${label.padEnd(9)} ${perEvent(wal, EVENTS)}${types}`;
}

try {
  await migrate(sql, await loadMigrations(MIGRATIONS_DIR));
  if (args.fillfactor !== undefined)
    await sql`alter table integration.consumer_inbox set (fillfactor = ${sql.unsafe(String(Number(args.fillfactor)))})`;
  const [fillfactor] = await sql<{ option: string | null }[]>`
    select (select option_value from pg_options_to_table(reloptions) where option_name = 'fillfactor') as option
    from pg_class where oid = 'integration.consumer_inbox'::regclass`;
  const meter = await walMeter(sql);

  // ---- ours
  const records = spreadRecords({
    topic: TOPIC,
    partitions: 8,
    count: EVENTS,
    value: (n) => envelope(n),
    key: (n) => payloads[n]!.caseId!,
  });
  const events: KafkaEvent[] = [];
  for (let i = 0; i < records.length; i += BATCH) events.push(mskEvent(records.slice(i, i + BATCH)));
  const ingest = createIngestHandler({ sql, consumer, config: { maxPayloadBytes: 256 * 1024 }, logger: quietLogger, metrics });
  let request = 0;

  const ours: Record<string, Wal> = {};
  ours.ingest = (
    await meter.measure(async () => {
      for (const e of events) {
        const r = await ingest(e, { awsRequestId: `wal-${++request}` });
        if (r.batchItemFailures.length > 0) throw new Error('ingest reported batch item failures');
      }
    })
  ).wal;
  ours.process = (
    await meter.measure(async () => {
      const r = await runWorker({
        sql,
        consumer,
        config: { worker: { batchSize: 100, safetyMarginMs: 1_000, leaseSeconds: 300 } },
        logger: quietLogger,
        metrics,
        owner: newOwnerId('wal'),
        remainingMs: () => 600_000,
      });
      if (r.processed !== EVENTS) throw new Error(`worker processed ${r.processed} of ${EVENTS}`);
    })
  ).wal;
  const drain = async (step: () => Promise<number>) => {
    let total = 0;
    for (;;) {
      const n = await step();
      total += n;
      if (n < REAPER_BATCH) return total;
    }
  };
  const leaveDue: RetentionPolicy = { ...consumer.retention, payloadRetentionDays: 0 };
  ours.leave = (
    await meter.measure(async () => {
      let kept = 0;
      const n = await drain(async () => {
        const r = await retireFinished(sql, consumer.name, leaveDue, REAPER_BATCH);
        kept += r.kept;
        return r.left;
      });
      if (n !== EVENTS || kept !== EVENTS) throw new Error(`${n} of ${EVENTS} left, ${kept} keys kept`);
    })
  ).wal;
  await sql`update integration.consumed_events set dedupe_until = now() - interval '1 second'`;
  await sql`vacuum integration.consumed_events`;
  ours.forget = (
    await meter.measure(async () => {
      const n = await drain(() => deleteExpiredKeys(sql, consumer.name, REAPER_BATCH));
      if (n !== EVENTS) throw new Error(`forgot ${n} of ${EVENTS} keys`);
    })
  ).wal;

  // ---- the peer
  const peer = await graphilePeer(server.url);
  const theirs: Record<string, Wal> = {};
  try {
    theirs.add = (await meter.measure(() => peer.add(payloads, BATCH))).wal;
    theirs.run = (await meter.measure(() => peer.drain({ concurrency: 10, localQueue: 500 }))).wal;
    theirs.cleanup = (await meter.measure(() => peer.cleanup())).wal;
  } finally {
    await peer.release();
  }

  const total = (phases: Record<string, Wal>): Wal => ({
    bytes: Object.values(phases).reduce((s, w) => s + w.bytes, 0),
    fpiBytes: Object.values(phases).reduce((s, w) => s + w.fpiBytes, 0),
    records: Object.values(phases).reduce((s, w) => s + w.records, 0),
    byType: [],
  });
  const [version] = await sql<{ v: string }[]>`select current_setting('server_version') as v`;
  console.log(
    `\nWAL per event: ${EVENTS} events, 1 KiB payloads, PostgreSQL ${version!.v}, inbox fillfactor ${fillfactor!.option ?? '100'}, a CHECKPOINT before each phase`,
  );
  console.log('  ours (case-projection, side effect included)');
  for (const [name, wal] of Object.entries(ours)) console.log(line(name, wal));
  const oursTotal = total(ours);
  console.log(line('lifecycle', oursTotal));
  console.log('  graphile-worker 0.17 (no-op task)');
  for (const [name, wal] of Object.entries(theirs)) console.log(line(name, wal));
  const theirsTotal = total(theirs);
  console.log(line('lifecycle', theirsTotal));
  const before = ours.ingest!.bytes + ours.process!.bytes;
  console.log(`\n  ingest + process: ${(before / theirsTotal.bytes).toFixed(2)} × the peer's lifecycle`);
  console.log(`  whole lifecycle:  ${(oursTotal.bytes / theirsTotal.bytes).toFixed(2)} × the peer's  (aim ≤ 1.00)`);
  console.log(
    `  without full-page images (Aurora's storage writes none): ${((oursTotal.bytes - oursTotal.fpiBytes) / (theirsTotal.bytes - theirsTotal.fpiBytes)).toFixed(2)} ×`,
  );
} finally {
  await sql.end({ timeout: 5 });
  await server.stop();
}
