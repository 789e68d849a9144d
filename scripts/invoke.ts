/**
 * `npm run invoke -- <function> [consumer] [--event file.json] [--env NAME=VALUE …]`: one
 * function invoked with an event file against the local database, as `sam local invoke -e`
 * does for a deployed one.
 *
 * The function runs in a process of its own, configured only by its environment as in
 * Lambda, and connects as its own database role (the consumer's, for ingest, worker and
 * relay), so a grant it lacks fails as it would in AWS. DATABASE_URL is the database's
 * owner (what `npm start -- --keep` prints, or your server): the role's URL is derived from it.
 *
 * Prints the handler's result as JSON on stdout and the function's log lines on stderr.
 * Exit codes: 0 the handler returned (ops: and answered 200), 1 it threw (or the database
 * was unreachable, or ops refused the command), 2 the command line was wrong.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { functionEntry } from '../tools/bundle';
import { CONSUMERS } from '../functions/consumers/index';
import { emitsEvents } from '../functions/framework/types';
import { DatabaseRoles, ingestRoleOf, relayRoleOf, workerRoleOf, type DatabaseRole } from '../functions/lib/database-roles';
import type { Sql } from '../functions/lib/db';
import { prepareRoleLogins, roleUrl } from '../tools/database-roles';
import { functionUrlRequest } from '../tools/function-url-events';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const FUNCTIONS = ['ingest', 'worker', 'reaper', 'relay', 'ops'] as const;
type Fn = (typeof FUNCTIONS)[number];
const PER_CONSUMER: readonly Fn[] = ['ingest', 'worker', 'relay'];

const USAGE = `usage: npm run invoke -- <${FUNCTIONS.join('|')}> [consumer] [--event file.json] [--env NAME=VALUE …]

  ingest <consumer> --event batch.json   an MSK event (npm run generate-event -- kafka … writes one)
  worker <consumer>                      a scheduled run: {"source":"schedule"} unless --event
  relay <consumer>                       a scheduled run (set KAFKA_BROKERS and AWS_REGION with --env)
  reaper                                 a scheduled run
  ops --event command.json               an ops command, e.g. {"command":"stats"}, through the function's URL
                                         as a local operator ("apply": true to act: a dry run otherwise)

DATABASE_URL: the local database's owner (npm start -- --keep prints it).
--event -: read the event from stdin.`;

class UsageError extends Error {}

interface Invocation {
  fn: Fn;
  consumer: string | undefined;
  role: DatabaseRole;
  event: unknown;
  env: Record<string, string>;
}

async function readEvent(path: string | undefined, fn: Fn): Promise<unknown> {
  if (path === undefined) {
    if (fn === 'ingest' || fn === 'ops')
      throw new UsageError(`${fn} needs --event: ${fn === 'ingest' ? 'an MSK event' : 'an ops command'}`);
    return { source: 'schedule' };
  }
  const text = path === '-' ? await readStdin() : await readFile(path, 'utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new UsageError(`--event ${path} is not JSON`);
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function roleOf(fn: Fn, consumerName: string | undefined): DatabaseRole {
  if (!PER_CONSUMER.includes(fn)) {
    if (consumerName !== undefined) throw new UsageError(`${fn} serves every consumer: name none`);
    return fn === 'reaper' ? DatabaseRoles.reaper : DatabaseRoles.ops;
  }
  if (consumerName === undefined) throw new UsageError(`${fn} needs a consumer (${CONSUMERS.map((c) => c.name).join(', ')})`);
  const consumer = CONSUMERS.find((c) => c.name === consumerName);
  if (consumer === undefined)
    throw new UsageError(`unknown consumer "${consumerName}" (known: ${CONSUMERS.map((c) => c.name).join(', ')})`);
  if (fn === 'ingest') return ingestRoleOf(consumer);
  if (fn === 'worker') return workerRoleOf(consumer);
  if (!emitsEvents(consumer)) throw new UsageError(`${consumerName} emits no events: it has no relay`);
  return relayRoleOf(consumer);
}

async function parse(argv: string[]): Promise<Invocation> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { event: { type: 'string' }, env: { type: 'string', multiple: true }, help: { type: 'boolean' } },
  });
  if (values.help === true) throw new UsageError('');
  const [fnName, consumer, ...rest] = positionals;
  if (!FUNCTIONS.includes(fnName as Fn)) throw new UsageError(`name a function: ${FUNCTIONS.join(', ')}`);
  if (rest.length > 0) throw new UsageError(`unexpected: ${rest.join(' ')}`);
  const fn = fnName as Fn;
  const env: Record<string, string> = {};
  for (const pair of values.env ?? []) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`--env ${pair}: write NAME=VALUE`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const event = await readEvent(values.event, fn);
  if (fn !== 'ops') return { fn, consumer, role: roleOf(fn, consumer), event, env };
  // Operators call the ops function through its URL, as their IAM identity (docs/ops.md): a local one here.
  return {
    fn,
    consumer,
    role: roleOf(fn, consumer),
    event: functionUrlRequest(event, LOCAL_OPERATOR),
    env: { OPERATOR_PRINCIPALS: JSON.stringify([LOCAL_OPERATOR]), ...env },
  };
}

/** The identity `npm run invoke -- ops` calls the ops function's URL with. */
const LOCAL_OPERATOR = `arn:aws:iam::000000000000:user/local-${userInfo().username.replace(/[^\w+=,.@-]/g, '-')}`;

/** The ops function's answer through its URL: the response body, and whether it said 200. */
function unwrapUrlResponse(result: unknown): { ok: boolean; body: unknown } {
  const r = result as { statusCode?: number; body?: string } | undefined;
  if (typeof r?.statusCode !== 'number') return { ok: true, body: result };
  return { ok: r.statusCode === 200, body: JSON.parse(r.body ?? 'null') as unknown };
}

/** The role's URL, its local password set first (the server's roles are the owner's to manage). */
async function roleConnection(ownerUrl: string, role: DatabaseRole): Promise<string> {
  const owner = postgres(ownerUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    await prepareRoleLogins(owner as unknown as Sql, ownerUrl, [role]);
  } finally {
    await owner.end({ timeout: 5 });
  }
  return roleUrl(ownerUrl, role);
}

/** Run the handler in its own process; its log lines go to stderr, its result is returned. */
function runHandler(inv: Invocation, databaseUrl: string, entry: string): Promise<{ code: number; result: unknown }> {
  const name = `local-${inv.fn}${inv.consumer === undefined ? '' : `-${inv.consumer}`}`;
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'tools/invoke-handler.mjs', entry, JSON.stringify(inv.event), '900000', randomUUID(), name],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        PATH: process.env.PATH ?? '',
        DATABASE_URL: databaseUrl,
        ...(inv.consumer === undefined ? {} : { CONSUMER_NAME: inv.consumer }),
        POWERTOOLS_METRICS_DISABLED: 'true',
        ...inv.env,
      },
    },
  );
  let result: unknown;
  let pending = '';
  child.stdout.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8');
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      if (line.startsWith('RESULT ')) result = JSON.parse(line.slice('RESULT '.length)) as unknown;
      else if (line !== '') process.stderr.write(`${line}\n`);
    }
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? 1, result })));
}

async function main(argv: string[]): Promise<number> {
  let inv: Invocation;
  try {
    inv = await parse(argv);
  } catch (error) {
    if (!(error instanceof UsageError) && !(error instanceof TypeError)) throw error;
    process.stderr.write(`${error.message === '' ? '' : `${error.message}\n\n`}${USAGE}\n`);
    return argv.includes('--help') ? 0 : 2;
  }
  const ownerUrl = process.env.DATABASE_URL;
  if (ownerUrl === undefined || ownerUrl === '') {
    process.stderr.write(`DATABASE_URL is not set: the local database's owner (npm start -- --keep prints it)\n\n${USAGE}\n`);
    return 2;
  }
  let databaseUrl: string;
  try {
    databaseUrl = await roleConnection(ownerUrl, inv.role);
  } catch (error) {
    process.stderr.write(`cannot prepare ${inv.role} on DATABASE_URL: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  // The function's generated entry (tools/bundle.ts): its own consumer's module, or the manifest.
  const { code, result } = await runHandler(inv, databaseUrl, await functionEntry(inv.fn, inv.consumer));
  if (code !== 0) return 1;
  const { ok, body } = unwrapUrlResponse(result);
  process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
  return ok ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
