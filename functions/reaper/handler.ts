/**
 * The reaper Lambda (docs/design.md §8), fired every minute by EventBridge Scheduler. Serves
 * every consumer declaration, so it has no CONSUMER_NAME. The work is in ./reaper.ts.
 */
import type { Context } from 'aws-lambda';
import { CONSUMERS } from '../consumers/index';
import { loadConfig } from '../lib/config';
import { beginInvocation, getSql, retryOnDeadConnection } from '../lib/db';
import { connectionRetried, createObservability } from '../lib/observability';
import { runOnce } from './reaper';

const config = loadConfig();
const { logger, metrics } = createObservability(config, 'reaper');

export async function handler(_event: unknown, context: Context): Promise<{ released: number; quarantined: number; purged: number }> {
  logger.addContext(context);
  const sql = await getSql(config.database);
  await beginInvocation(sql, context);
  const result = await retryOnDeadConnection(
    sql,
    () =>
      runOnce({
        sql,
        consumers: CONSUMERS,
        config,
        logger,
        metrics,
        remainingMs: () => context.getRemainingTimeInMillis(),
      }),
    connectionRetried(logger),
  );
  return { released: result.released, quarantined: result.quarantined, purged: result.purged };
}
