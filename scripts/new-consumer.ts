/**
 * `npm run new-consumer -- <name> --topic T [--event-type E]`: a new consumer, ready to be
 * filled in, in the repository it is run in (the current folder):
 *
 *   functions/consumers/<name>.ts           its declaration: one handler that stores each event
 *   functions/consumers/index.ts            its line in CONSUMERS (and its import)
 *   migrations/<next>_<schema>.sql          its schema and table (passes `npm run lint:migrations`)
 *   test/db/consumers/<name>.test.ts        its test, on the test kit (testing/index.ts)
 *
 * and prints what remains to decide. Nothing else in the repository needs to change
 * (docs/consumers.md). Exit codes: 0 written, 2 a bad name or topic, or a consumer of that
 * name (or its files) already there; nothing is written then.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const USAGE = `usage: npm run new-consumer -- <name> --topic T [--event-type E]

  <name>            the consumer's name: a-z, 0-9 and single dashes, starting with a letter, 50 at most
  --topic T         the Kafka topic it reads
  --event-type E    the event type its handler takes (default: the topic's name)`;

class UsageError extends Error {}

/** Its roles are inbox_<kind>_<name with _>: 63 characters at most for PostgreSQL. */
const NAME = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;
const MAX_NAME = 50;
const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;

const camel = (name: string) => name.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function declaration(name: string, topic: string, eventType: string, table: string): string {
  return `/**
 * ${name}: reads ${topic}. Written by \`npm run new-consumer\`: its handler stores each event in
 * ${table}; make it do what the consumer is for (docs/consumers.md).
 */
import { z } from 'zod';
import { defineHandler, DEFAULT_RETENTION, DEFAULT_RETRY, type ConsumerDeclaration } from '../framework';

export const ${constName(name)}_TOPIC = '${topic}';
export const ${constName(name)}_EVENT = '${eventType}';

/** TODO: the payload's schema: a payload that fails it is quarantined PAYLOAD_INVALID. */
const payload = z.object({}).passthrough();

const received = defineHandler({
  payload,
  async handle(tx, event) {
    // Insert-if-absent: a redelivered or replayed event changes nothing.
    await tx\`
      insert into ${table} (event_id, aggregate_id, payload)
      values (\${event.eventId}, \${event.aggregateId}, \${tx.json(event.payload as never)})
      on conflict do nothing\`;
  },
});

export const ${camel(name)}: ConsumerDeclaration = {
  name: '${name}',
  topics: [${constName(name)}_TOPIC],
  dialect: 'canonical',
  mode: 'deferred',
  handlers: {
    [${constName(name)}_EVENT]: { 1: received },
  },
  retry: DEFAULT_RETRY,
  retention: DEFAULT_RETENTION,
  tables: {
    // What the handler does on its table: its roles get exactly this (a missing grant is DB_PERMISSION).
    '${table}': { insert: true },
  },
};
`;
}

function constName(name: string): string {
  return name.replace(/-/g, '_').toUpperCase();
}

function migration(name: string, schema: string, table: string): string {
  return `-- ${name}'s own schema and table (functions/consumers/${name}.ts): one row per event it
-- received. The consumer's roles get what its declaration's \`tables\` names, from the
-- migration step; nothing here grants anything.
create schema ${schema};

create table ${table} (
    event_id      text not null,
    aggregate_id  text not null,
    payload       jsonb not null,
    received_at   timestamptz not null default now(),

    constraint ${table.split('.')[1]}_pk primary key (event_id)
);
`;
}

function test(name: string, table: string): string {
  return `/** ${name}, end to end on the test kit: its ingest, its worker and its table, as its own roles. */
import { describe, expect, it } from 'vitest';
import { ${camel(name)}, ${constName(name)}_EVENT } from '../../../functions/consumers/${name}';
import { useTestInbox } from '../../../testing';

const inbox = await useTestInbox({ reset: true });
const consumer = inbox.consumer(${camel(name)});

function envelope(eventId: string, payload: Record<string, unknown> = {}) {
  return {
    eventId,
    eventType: ${constName(name)}_EVENT,
    eventVersion: 1,
    occurredAt: '2026-07-03T09:15:30Z',
    producer: 'test',
    aggregateType: 'test',
    aggregateId: \`agg-\${eventId}\`,
    payload,
  };
}

describe('${name}', () => {
  it('stores each event once, however often it is delivered', async () => {
    const report = await consumer.deliver([envelope('e1', { n: 1 }), envelope('e2', { n: 2 })]);
    expect(report).toMatchObject({ inserted: 2, poisoned: 0 });
    expect(await consumer.deliver([envelope('e1', { n: 1 })])).toMatchObject({ inserted: 0, duplicates: 1 });

    expect(await consumer.work()).toMatchObject({ processed: 2, quarantined: 0 });

    expect((await consumer.rows()).map((r) => [r.eventId, r.status])).toEqual([
      ['e1', 'PROCESSED'],
      ['e2', 'PROCESSED'],
    ]);
    expect(await inbox.sql\`select event_id, payload from ${table} order by event_id\`).toEqual([
      { event_id: 'e1', payload: { n: 1 } },
      { event_id: 'e2', payload: { n: 2 } },
    ]);
  });
});
`;
}

/** The list entry: the import after the last consumer import, the declaration at the end of CONSUMERS. */
function withEntry(index: string, name: string): string {
  const list = /export const CONSUMERS: readonly ConsumerDeclaration\[\] = \[([^\]]*)\];/;
  const match = list.exec(index);
  if (match === null)
    throw new UsageError('functions/consumers/index.ts: no `export const CONSUMERS: readonly ConsumerDeclaration[] = [...]` found');
  const entries = match[1]!.trim().replace(/,$/, '');
  const listed = index.replace(list, `export const CONSUMERS: readonly ConsumerDeclaration[] = [${entries}, ${camel(name)}];`);
  const imports = [...listed.matchAll(/^import \{[^}]*\} from '\.\/[^']+';$/gm)];
  const last = imports.at(-1);
  const line = `import { ${camel(name)} } from './${name}';`;
  if (last === undefined) return `${line}\n${listed}`;
  const at = last.index + last[0].length;
  return `${listed.slice(0, at)}\n${line}${listed.slice(at)}`;
}

async function nextMigration(root: string): Promise<string> {
  const versions = (await readdir(join(root, 'migrations')))
    .map((f) => /^(\d{4})_.*\.sql$/.exec(f)?.[1])
    .filter((v): v is string => v !== undefined)
    .map(Number);
  return String(Math.max(0, ...versions) + 1).padStart(4, '0');
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { topic: { type: 'string' }, 'event-type': { type: 'string' }, help: { type: 'boolean' } },
    allowPositionals: true,
  });
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [name, ...rest] = positionals;
  if (name === undefined || rest.length > 0) throw new UsageError('name one consumer');
  if (!NAME.test(name) || name.length > MAX_NAME) {
    throw new UsageError(`"${name}": a consumer's name is a-z, 0-9 and single dashes, starting with a letter, ${MAX_NAME} at most`);
  }
  const topic = values.topic;
  if (topic === undefined || !TOPIC.test(topic)) throw new UsageError('--topic: a Kafka topic name (letters, digits, . _ -)');
  const eventType = values['event-type'] ?? topic;

  const root = process.cwd();
  const schema = name.replace(/-/g, '_');
  const table = `${schema}.received_event`;
  const files = {
    declaration: join('functions', 'consumers', `${name}.ts`),
    index: join('functions', 'consumers', 'index.ts'),
    test: join('test', 'db', 'consumers', `${name}.test.ts`),
  };
  const index = await readFile(join(root, files.index), 'utf8');
  if (existsSync(join(root, files.declaration)) || existsSync(join(root, files.test))) {
    throw new UsageError(`a consumer "${name}" is there already (${files.declaration})`);
  }
  const migrationsDir = await readdir(join(root, 'migrations'));
  if (migrationsDir.some((f) => f.endsWith(`_${schema}.sql`))) throw new UsageError(`a migration for "${schema}" is there already`);
  const updated = withEntry(index, name);
  const migrationFile = join('migrations', `${await nextMigration(root)}_${schema}.sql`);

  await writeFile(join(root, files.declaration), declaration(name, topic, eventType, table));
  await writeFile(join(root, migrationFile), migration(name, schema, table));
  await mkdir(join(root, 'test', 'db', 'consumers'), { recursive: true });
  await writeFile(join(root, files.test), test(name, table));
  await writeFile(join(root, files.index), updated);

  process.stdout.write(
    [
      `new consumer ${name}, on ${topic}:`,
      `  wrote   ${files.declaration}`,
      `  wrote   ${migrationFile}`,
      `  wrote   ${files.test}`,
      `  listed  ${camel(name)} in ${files.index}`,
      '',
      'To decide (docs/consumers.md):',
      `  - the payload's schema (${files.declaration}: \`payload\`), and the event types and versions it takes`,
      `  - its table: the columns it needs (${migrationFile}; expand-only once deployed) and what the handler does on it (\`tables\`)`,
      '  - dialect (canonical or snake_case) and mode (deferred, or inline in the ingest transaction)',
      '  - what a failure means: retry policy, quarantine policy (continue or hold-aggregate), retention',
      '  - what it emits (`emits`) and audits (`audit`), if anything',
      '  - its stack, if not main (a stage records it in cdk.json consumerStacks only then)',
      `Then: npx vitest run --project db ${files.test}; npm run lint:migrations; npm run typecheck`,
      '',
    ].join('\n'),
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError || (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))) {
      process.stderr.write(`new-consumer: ${error.message}\n${USAGE}\n`);
      process.exitCode = 2;
      return;
    }
    process.stderr.write(`new-consumer: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
