/**
 * The operator CLI: `npm run ops -- <command> [options]`, as the ops function's database
 * role inbox_ops: DATABASE_URL with that user, or (AWS) the ops function's own configuration,
 * DB_IAM_USER=inbox_ops with an IAM token. Tables for people, `--json` for scripts.
 * Exit codes: 0 done, 1 the command failed (nothing matched, not found, still invalid, an
 * AWS or database error), 2 the command line was wrong (nothing was done).
 */
import { pathToFileURL } from 'node:url';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { S3Client } from '@aws-sdk/client-s3';
import { SSMClient } from '@aws-sdk/client-ssm';
import { ConfigError, loadConfig, type Config } from '../lib/config';
import { localManifest } from '../consumers';
import { createSql } from '../lib/db';
import { osUser } from './command';
import { COMMAND_NAMES, isCommandName, type CommandName } from './commands';
import { OpsError, OpsErrorCodes } from './errors';
import { formatSkipped } from './format';
import { commandOf, runCommand } from './run';

export const USAGE = [
  'usage: npm run ops -- <command> [options] [--json]',
  '',
  ...COMMAND_NAMES.map((name) => `  ${commandOf(name).usage}`),
  '',
  '  --actor defaults to the OS user. --json prints the result (or the error) as JSON.',
].join('\n');

/** Flags that take no value. */
const BOOLEAN_FLAGS = new Set(['dryRun', 'includePayload', 'includeResolved', 'worker', 'ingest', 'json', 'help']);

export interface ParsedArgs {
  command: string | undefined;
  args: Record<string, unknown>;
  json: boolean;
  help: boolean;
}

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

function bad(message: string): OpsError {
  return new OpsError(OpsErrorCodes.BAD_ARGUMENTS, message);
}

/** argv (after the script) → `{ command, args }`. `poison list` is `poison-list`; `--id a --id b` and `--ids a,b` are `ids`. */
export function parseArgv(argv: readonly string[]): ParsedArgs {
  const positionals: string[] = [];
  const args: Record<string, unknown> = {};
  const ids: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (token === '-h') {
      args.help = true;
      continue;
    }
    if (!token.startsWith('--')) {
      positionals.push(token);
      continue;
    }
    const eq = token.indexOf('=');
    const key = camel(token.slice(2, eq === -1 ? undefined : eq));
    let value: string | true;
    if (eq !== -1) value = token.slice(eq + 1);
    else if (BOOLEAN_FLAGS.has(key)) value = true;
    else {
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw bad(`--${token.slice(2)} needs a value`);
      value = next;
      i++;
    }
    if (key === 'id' || key === 'ids') {
      if (value === true) throw bad(`--${key} needs a value`);
      ids.push(
        ...value
          .split(',')
          .map((v) => v.trim())
          .filter((v) => v !== ''),
      );
      continue;
    }
    if (key in args) throw bad(`--${token.slice(2).split('=')[0]} given twice`);
    args[key] = value;
  }
  const { json, help, ...rest } = args;

  let command = positionals.shift();
  if (command === 'help') return { command: undefined, args: rest, json: json === true, help: true };
  const joined = command !== undefined && positionals[0] !== undefined ? `${command}-${positionals[0]}` : undefined;
  if (joined !== undefined && isCommandName(joined)) {
    command = joined;
    positionals.shift();
  }
  if (command !== undefined && isCommandName(command) && commandOf(command).positional === 'id' && positionals.length === 1) {
    rest.id = positionals.shift();
  }
  if (positionals.length > 0) throw bad(`unexpected argument(s): ${positionals.join(' ')}`);
  if (ids.length > 0) {
    if (command === 'replay' || command === 'schedule-replay') rest.ids = ids;
    else if (ids.length === 1) rest.id = ids[0];
    else throw bad('--id given more than once');
  }
  return { command, args: rest, json: json === true, help: help === true };
}

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/** Run the CLI; resolves to the process exit code. */
export async function main(argv: readonly string[], io: CliIo, getConfig: () => Config = loadConfig): Promise<number> {
  let parsed: ParsedArgs;
  try {
    parsed = parseArgv(argv);
  } catch (error) {
    io.stderr(`error: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { json } = parsed;
  if (parsed.help || parsed.command === undefined) {
    (parsed.help ? io.stdout : io.stderr)(USAGE);
    return parsed.help ? 0 : 2;
  }

  const fail = (code: string, message: string, exit: number, details?: Record<string, unknown>): number => {
    if (json) io.stdout(JSON.stringify({ ok: false, error: { code, message, ...(details ? { details } : {}) } }, null, 2));
    io.stderr(`error [${code}]: ${message}`);
    return exit;
  };

  let config: Config;
  try {
    config = getConfig();
  } catch (error) {
    if (error instanceof ConfigError) return fail('CONFIG', error.message, 2);
    throw error;
  }
  const sql = await createSql(config.database);
  // Built on first use: most commands never talk to AWS.
  let schedulerClient: SchedulerClient | undefined;
  let lambdaClient: LambdaClient | undefined;
  let ssmClient: SSMClient | undefined;
  let s3Client: S3Client | undefined;
  try {
    const scheduler = {
      send: ((command: never) => (schedulerClient ??= new SchedulerClient({})).send(command)) as SchedulerClient['send'],
    };
    const lambda = {
      send: ((command: never) => (lambdaClient ??= new LambdaClient({})).send(command)) as LambdaClient['send'],
    };
    const ssm = {
      send: ((command: never) => (ssmClient ??= new SSMClient({})).send(command)) as SSMClient['send'],
    };
    const s3 = {
      send: ((command: never) => (s3Client ??= new S3Client({})).send(command)) as S3Client['send'],
    };
    // An audit row the database refused (functions/ops/command.ts recordOrLog) goes to stderr.
    const logger = {
      info: () => {},
      error: (message: string, extra: Record<string, unknown>) => io.stderr(JSON.stringify({ level: 'ERROR', message, ...extra })),
    };
    const result = await runCommand(
      { sql, scheduler, lambda, ssm, s3, config, logger, consumers: localManifest() },
      { command: parsed.command, ...parsed.args },
      { source: 'cli', defaultActor: osUser() },
    );
    io.stdout(
      json
        ? JSON.stringify({ ok: true, command: parsed.command, result }, null, 2)
        : commandOf(parsed.command as CommandName).format(result),
    );
    return 0;
  } catch (error) {
    if (error instanceof OpsError) {
      const exit = fail(error.code, error.message, error.isUsageError ? 2 : 1, error.details);
      if (!json && error.details?.skipped !== undefined) io.stderr(formatSkipped(error.details.skipped));
      return exit;
    }
    const e = error as { name?: string; code?: string; message?: string };
    return fail(e.code ?? e.name ?? 'ERROR', e.message ?? String(error), 1);
  } finally {
    schedulerClient?.destroy();
    lambdaClient?.destroy();
    ssmClient?.destroy();
    s3Client?.destroy();
    await sql.end({ timeout: 5 });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2), {
    stdout: (t) => process.stdout.write(`${t}\n`),
    stderr: (t) => process.stderr.write(`${t}\n`),
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
