/**
 * graphile-worker, the peer the benchmarks measure beside ours on the same server in the
 * same run (a bench-only devDependency). Its batched mode: jobs fetched and locked 500 at
 * a time into a local queue, completions batched, 10 concurrent no-op tasks.
 */
import { makeWorkerUtils, run, Logger, type WorkerUtils } from 'graphile-worker';
import postgres from 'postgres';

/** graphile-worker's own logger, silenced (a benchmark prints only its figures). */
const quiet = new Logger(() => () => {});

export interface GraphilePeer {
  /** Add one no-op job per payload, `batch` jobs per addJobs call. */
  add(payloads: readonly unknown[], batch?: number): Promise<void>;
  /** Run a batched worker until no job is left; resolves to the seconds it took. */
  drain(options?: { concurrency?: number; localQueue?: number }): Promise<number>;
  /** graphile-worker's own maintenance (its GC tasks); completed jobs are deleted on completion. */
  cleanup(): Promise<void>;
  /** Empty its tables between scenarios. */
  reset(): Promise<void>;
  /** Jobs not yet done. */
  remaining(): Promise<number>;
  release(): Promise<void>;
}

export async function graphilePeer(connectionString: string): Promise<GraphilePeer> {
  const utils: WorkerUtils = await makeWorkerUtils({ connectionString, logger: quiet });
  await utils.migrate();
  const sql = postgres(connectionString, { max: 1, onnotice: () => {} });
  const remaining = async () => {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from graphile_worker._private_jobs`;
    return row?.n ?? 0;
  };
  return {
    async add(payloads, batch = 500) {
      for (let i = 0; i < payloads.length; i += batch) {
        await utils.addJobs(payloads.slice(i, i + batch).map((payload) => ({ identifier: 'noop', payload: payload as object })));
      }
    },
    async drain({ concurrency = 10, localQueue = 500 } = {}) {
      const started = performance.now();
      const runner = await run({
        connectionString,
        concurrency,
        noHandleSignals: true,
        pollInterval: 50,
        logger: quiet,
        taskList: { noop: async () => {} },
        preset: { worker: { localQueue: { size: localQueue }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      });
      try {
        while ((await remaining()) > 0) await new Promise((r) => setTimeout(r, 20));
        return (performance.now() - started) / 1000;
      } finally {
        await runner.stop();
      }
    },
    async cleanup() {
      await utils.cleanup({ tasks: ['GC_JOB_QUEUES', 'GC_TASK_IDENTIFIERS', 'DELETE_PERMAFAILED_JOBS'] });
    },
    async reset() {
      await sql`truncate graphile_worker._private_jobs, graphile_worker._private_job_queues`;
    },
    remaining,
    async release() {
      await utils.release();
      await sql.end({ timeout: 5 });
    },
  };
}
