/**
 * Worker function: drains the due rows of one consumer within the invocation's time
 * budget (EventBridge Scheduler, rate(1 minute)). The logic lives in run-worker.ts.
 */
import type { Context } from 'aws-lambda';
import { getConsumer } from '../consumers';
import { loadConfig, requireConsumerName } from '../lib/config';
import { getSql } from '../lib/db';
import { createObservability } from '../lib/observability';
import { newOwnerId, runWorker, type WorkerResult } from './run-worker';

const config = loadConfig();
const consumer = getConsumer(requireConsumerName(config));
const { logger, metrics } = createObservability(config, 'worker');

export async function handler(_event: unknown, context: Context): Promise<WorkerResult> {
  logger.addContext(context);
  try {
    const sql = await getSql(config.database);
    // The request id names the invocation; the suffix keeps it unique when Lambda retries
    // an asynchronous invocation under the same request id.
    const owner = newOwnerId(`worker:${context.awsRequestId}`);
    const result = await runWorker({
      sql,
      consumer,
      config,
      logger,
      metrics,
      owner,
      remainingMs: () => context.getRemainingTimeInMillis(),
    });
    logger.info('worker_finished', { ...result });
    return result;
  } finally {
    metrics.publishStoredMetrics();
  }
}
