/**
 * The PostgreSQL server a benchmark runs against: BENCH_DATABASE_URL when set, otherwise an
 * embedded one started here (and stopped by `stop()`).
 */
import { startEmbeddedPostgres, type EmbeddedOptions } from '../tools/embedded-postgres';

export interface BenchServer {
  url: string;
  stop(): Promise<void>;
}

/** `settings` apply to the embedded server only (an external one is used as it is). */
export async function benchServer(settings: EmbeddedOptions['settings'] = {}): Promise<BenchServer> {
  const external = process.env.BENCH_DATABASE_URL;
  if (external) return { url: external, stop: async () => {} };
  console.log('starting embedded PostgreSQL…');
  const embedded = await startEmbeddedPostgres({ settings });
  return { url: embedded.url, stop: () => embedded.stop() };
}
