/**
 * Running the project's real commands in child processes, as a user would: their exit
 * codes, their output and what they leave behind.
 */
import { spawn, type SpawnOptions } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

export const REPO_ROOT = new URL('../../', import.meta.url).pathname;
/** What `npm start` runs (package.json), without npm: one Node.js process with tsx's loader. */
export const START = [process.execPath, '--import', 'tsx', join(REPO_ROOT, 'scripts/local.ts')] as const;

export const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Started {
  pid: number;
  /** Resolves when the output matches, with everything printed so far. */
  waitFor(pattern: RegExp): Promise<string>;
  finished: Promise<Finished>;
}

/** Start a command; never rejects on a non-zero exit (the test reads `code`). */
export function start(command: string, args: readonly string[], options: SpawnOptions & { timeoutMs?: number } = {}): Started {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const waiters: { pattern: RegExp; resolve: (out: string) => void }[] = [];
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i]!.pattern.test(stdout)) waiters.splice(i, 1)[0]!.resolve(stdout);
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 110_000);
  const finished = new Promise<Finished>((resolve, reject) => {
    child.on('error', reject);
    // 'close': the output is complete, also of children that outlived the command itself.
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return {
    pid: child.pid!,
    waitFor: (pattern) =>
      pattern.test(stdout)
        ? Promise.resolve(stdout)
        : new Promise((resolve, reject) => {
            waiters.push({ pattern, resolve });
            void finished.then((f) =>
              reject(new Error(`exited (${f.code ?? f.signal}) before printing ${pattern}:\n${f.stdout}\n${f.stderr}`)),
            );
          }),
    finished,
  };
}

export function run(command: string, args: readonly string[], options: SpawnOptions & { timeoutMs?: number } = {}): Promise<Finished> {
  return start(command, args, options).finished;
}

/**
 * A fresh temporary folder every user can traverse: a child's TMPDIR, to see what it leaves
 * there. Removed when the test that made it ends.
 */
export function openTmpDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o755);
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** What the embedded PostgreSQL would have left in a TMPDIR (tsx keeps its own cache there). */
export function embeddedLeftovers(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.startsWith('inbox-pg-') || name.startsWith('pg-password-'));
}

/**
 * The environment for a child that must start its own embedded PostgreSQL: no server URL
 * (CI's second pass sets TEST_DATABASE_URL), no Powertools test settings.
 */
export function embeddedEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const key of ['TEST_DATABASE_URL', 'DATABASE_URL', 'VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID', 'NODE_OPTIONS']) delete env[key];
  return env;
}
