/**
 * The parent side of _handler-process.ts: a function started in its own process with the
 * environment given (and nothing inherited but PATH and the benchmark's Powertools switches),
 * invoked event by event, its log collected from its standard output and error.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('./_handler-process.ts', import.meta.url));

export interface FunctionProcess {
  invoke<T = unknown>(event: unknown, timeoutMs?: number): Promise<{ result: T; ms: number }>;
  /** Every line the function wrote since it started (or since the last `drainLog`), once its pipes caught up. */
  drainLog(): Promise<string[]>;
  close(): Promise<void>;
}

export async function startFunction(handlerModule: string, env: Record<string, string>): Promise<FunctionProcess> {
  const child = fork(script, [handlerModule], {
    execArgv: ['--import', 'tsx'],
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let log = '';
  child.stdout!.on('data', (chunk: Buffer) => (log += chunk.toString('utf8')));
  child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString('utf8')));
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`${handlerModule} exited with ${code} before it was ready:\n${log}`)));
  });
  return {
    invoke<T>(event: unknown, timeoutMs = 120_000) {
      return new Promise<{ result: T; ms: number }>((resolve, reject) => {
        child.once('message', (m: { result: T; ms: number } | { error: string }) =>
          'error' in m ? reject(new Error(`${handlerModule}: ${m.error}`)) : resolve(m),
        );
        child.send({ event, timeoutMs });
      });
    },
    async drainLog() {
      // The answer comes over IPC, the log over the pipes: let them catch up.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const lines = log.split('\n').filter((l) => l.trim() !== '');
      log = '';
      return lines;
    },
    async close() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send('exit');
      await exited;
    },
  };
}
