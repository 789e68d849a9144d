/**
 * The reaper Lambda (docs/design.md §8), fired every minute by EventBridge Scheduler. Serves
 * every consumer declaration, so it has no CONSUMER_NAME; it reads them from the manifest
 * its bundle carries (functions/framework/manifest.ts) and runs no consumer code. The work
 * is in ./reaper.ts.
 */
import type { Context } from 'aws-lambda';
import type { ConsumerManifest } from '../framework/manifest';
import { loadConfig } from '../lib/config';
import { beginInvocation, getSql, retryOnDeadConnection } from '../lib/db';
import { connectionRetried, createObservability } from '../lib/observability';
import { runOnce } from './reaper';

export type ReaperLambda = (event: unknown, context: Context) => Promise<{ released: number; quarantined: number; purged: number }>;

/** The Lambda handler of the reaper over the manifest's consumers, configured from the environment. */
export function reaperLambda(consumers: ConsumerManifest): ReaperLambda {
  const config = loadConfig();
  const { logger, metrics } = createObservability(config, 'reaper');

  return async function handler(_event, context) {
    logger.addContext(context);
    const sql = await getSql(config.database);
    await beginInvocation(sql, context);
    const result = await retryOnDeadConnection(
      sql,
      () => runOnce({ sql, consumers, config, logger, metrics, remainingMs: () => context.getRemainingTimeInMillis() }),
      connectionRetried(logger),
    );
    return { released: result.released, quarantined: result.quarantined, purged: result.purged };
  };
}
