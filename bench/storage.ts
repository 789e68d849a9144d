/**
 * `npm run bench -- storage [--rows 1000000] [--keys 1000000] [--rate 100] [--fillfactor N]`
 *
 * Bytes per row, measured: --rows finished inbox rows shaped as the WAL benchmark's
 * (1 KiB payload, case-projection's columns), and --keys kept dedupe keys
 * (integration.consumed_events), each table's heap, TOAST and every index divided by its
 * rows. Then the month at --rate events/s for one consumer with the default retention:
 * rows stay in the inbox for the payload retention (2 days), their keys for the rest of
 * the dedupe window (28 more days).
 *
 * The rows go in finished, in one statement, at the table's fillfactor, as a steady inbox
 * refills pages that vacuum has emptied; rows still queued or in flight are a backlog's
 * worth (kilobytes to megabytes) and left out. The payload filler's compressibility does
 * not matter: PostgreSQL compresses a value only in a row longer than about 2 KB
 * (TOAST_TUPLE_THRESHOLD, whatever the table's toast_tuple_target), so a 1 KiB payload is
 * stored as it is (test/db/worker/page-room.test.ts). Times are spread as 100 events/s
 * spreads them, so that no index is smaller for repeated values, and the rows go in in
 * arrival order, oldest first, as they do in production: an index on a time (the finished
 * rows', the keys' window) then fills its pages from the right, as it does there, instead
 * of splitting them in half as rows inserted newest first would.
 *
 * --fillfactor sets the inbox's fillfactor first, for an experiment (the migrations' choice
 * otherwise). A million rows take about four minutes on a small shared machine.
 */
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { DEFAULT_RETENTION } from '../functions/framework/types';
import { TYPES, type Sql } from '../functions/lib/db';
import { migrate } from '../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../functions/lib/migration-files';
import { benchServer } from './_server';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    keys: { type: 'string', default: '1000000' },
    rate: { type: 'string', default: '100' },
    fillfactor: { type: 'string' },
  },
});
const ROWS = Number(args.rows);
const KEYS = Number(args.keys);
const RATE = Number(args.rate);

const server = await benchServer({ autovacuum: 'off', max_wal_size: '8GB', full_page_writes: 'off', synchronous_commit: 'off' });
const sql = postgres(server.url, { max: 2, onnotice: () => {}, types: TYPES }) as unknown as Sql;

interface Relation {
  name: string;
  bytes: number;
}

/** Heap (with its TOAST) and each index of a table. */
async function sizes(table: string): Promise<Relation[]> {
  const rows = await sql<{ name: string; bytes: string }[]>`
    select 'heap' as name,
           (pg_relation_size(c.oid) + coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0))::text as bytes
    from pg_class c where c.oid = ${table}::regclass
    union all
    select i.indexrelid::regclass::text, pg_relation_size(i.indexrelid)::text
    from pg_index i where i.indrelid = ${table}::regclass
    order by 2 desc`;
  return rows.map((r) => ({ name: r.name.replace(/^integration\./, ''), bytes: Number(r.bytes) }));
}

const GB = 1e9;
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

try {
  await migrate(sql, await loadMigrations(MIGRATIONS_DIR));
  if (args.fillfactor !== undefined)
    await sql`alter table integration.consumer_inbox set (fillfactor = ${sql.unsafe(String(Number(args.fillfactor)))})`;
  const [fillfactor] = await sql<{ option: string | null }[]>`
    select (select option_value from pg_options_to_table(reloptions) where option_name = 'fillfactor') as option
    from pg_class where oid = 'integration.consumer_inbox'::regclass`;
  const started = Date.now();
  await sql`
    insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type,
      aggregate_id, topic_name, partition_no, offset_no, correlation_id, producer, occurred_at, received_at, status,
      processed_at, lease_expires_at, partition_key, record_key, payload)
    select 'case-projection', 'evt_' || md5(g::text), 'regulatory.case.accepted.v1', 1, 'case', 'case_' || g,
           'regulatory.case.events.v1', g % 8, g, 'corr_' || g, 'case-command-service', t.at, t.at, 'PROCESSED',
           t.at + interval '2 seconds', t.at + interval '5 minutes', 'case_' || g, 'case_' || g,
           jsonb_build_object('caseId', 'case_' || g, 'acceptedAt', '2026-07-03T09:15:30Z',
                              'note', left(repeat(md5(g::text), 30), 940))
    from generate_series(1, ${ROWS}) g
    cross join lateral (select now() - make_interval(secs => (${ROWS} - g) * 0.01) as at) t`;
  await sql`
    insert into integration.consumed_events (consumer_name, event_id, inbox_id, event_type, status, topic_name,
      partition_no, offset_no, received_at, processed_at, dedupe_until)
    select 'case-projection', 'evt_' || md5(g::text), gen_random_uuid(), 'regulatory.case.accepted.v1', 'PROCESSED',
           'regulatory.case.events.v1', g % 8, g, t.at - interval '2 seconds', t.at, t.at + interval '30 days'
    from generate_series(1, ${KEYS}) g
    cross join lateral (select now() - interval '7 days' - make_interval(secs => (${KEYS} - g) * 0.01) as at) t`;
  const seconds = (Date.now() - started) / 1000;
  const [payload] = await sql<{ avg: string }[]>`
    select avg(pg_column_size(payload))::text as avg from (select payload from integration.consumer_inbox limit 1000) p`;

  const inbox = await sizes('integration.consumer_inbox');
  const keys = await sizes('integration.consumed_events');
  const perRow = (rels: Relation[], n: number) => rels.reduce((s, r) => s + r.bytes, 0) / n;
  const [version] = await sql<{ v: string }[]>`select current_setting('server_version') as v`;
  console.log(
    `\nBytes per row: ${fmt(ROWS)} finished inbox rows (payload ${fmt(Number(payload!.avg))} B stored, fillfactor ${fillfactor!.option ?? '100'}), ${fmt(KEYS)} kept keys, PostgreSQL ${version!.v} (${fmt(seconds)} s to insert)`,
  );
  for (const [label, rels, n] of [
    ['integration.consumer_inbox', inbox, ROWS],
    ['integration.consumed_events', keys, KEYS],
  ] as const) {
    console.log(`  ${label}: ${fmt(perRow(rels, n))} B/row`);
    for (const r of rels) console.log(`    ${r.name.padEnd(44)} ${fmt(r.bytes / n, 1).padStart(8)} B/row`);
  }

  const perDay = RATE * 86_400;
  const inInbox = perDay * DEFAULT_RETENTION.payloadRetentionDays;
  const kept = perDay * (DEFAULT_RETENTION.dedupeWindowDays - DEFAULT_RETENTION.payloadRetentionDays);
  const inboxGb = (inInbox * perRow(inbox, ROWS)) / GB;
  const keysGb = (kept * perRow(keys, KEYS)) / GB;
  console.log(
    `\nOne consumer at ${RATE} events/s, default retention (payload ${DEFAULT_RETENTION.payloadRetentionDays} d, dedupe window ${DEFAULT_RETENTION.dedupeWindowDays} d):`,
  );
  console.log(
    `  inbox rows (last ${DEFAULT_RETENTION.payloadRetentionDays} days)   ${fmt(inInbox / 1e6, 1).padStart(7)} M  ${fmt(inboxGb, 1).padStart(7)} GB`,
  );
  console.log(
    `  kept keys (the other ${DEFAULT_RETENTION.dedupeWindowDays - DEFAULT_RETENTION.payloadRetentionDays} days) ${fmt(kept / 1e6, 1).padStart(7)} M  ${fmt(keysGb, 1).padStart(7)} GB`,
  );
  console.log(
    `  total                           ${fmt((inInbox + kept) / 1e6, 1).padStart(7)} M  ${fmt(inboxGb + keysGb, 1).padStart(7)} GB`,
  );
} finally {
  await sql.end({ timeout: 5 });
  await server.stop();
}
