/**
 * One claimed batch, run to a report however its transaction ends: committed
 * (process-batch.ts), refused for its data as a whole (each row again on its own), or
 * failed as a whole (failBatch records the failed attempt).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { classifyError, ErrorCodes, isConnectionError, RetryableError } from '../lib/errors';
import { failBatch, processBatch, type BatchContext, type BatchLane, type BatchReport } from './process-batch';

export interface ClaimedBatchResult {
  reports: BatchReport[];
  /** The batch failed as a whole for a reason worth retrying (the database, not a row). */
  failed: boolean;
}

/**
 * One claimed batch. Resolves to the batch's reports and whether it failed as a whole
 * for a reason worth retrying; throws RetryableError DB_CONNECTION when the connection died.
 */
export async function runClaimedBatch(ctx: BatchContext, logger: Logger, lanes: readonly BatchLane[]): Promise<ClaimedBatchResult> {
  try {
    return { reports: [await processBatch(ctx, lanes)], failed: false };
  } catch (error) {
    const c = classifyError(error);
    const rows = lanes.reduce((n, l) => n + l.rows.length, 0);
    logger.error('worker_batch_failed', { consumerName: ctx.consumer.name, rows, errorCode: c.code, sqlState: c.sqlState });
    if (isConnectionError(error)) {
      // The connection died under the batch: whether its COMMIT landed is unknown, and
      // the database may be failing over. Write nothing more; the rows stay PROCESSING
      // under this owner until their lease (capped at this invocation's end) expires
      // and the reaper returns them and their lanes, their attempt already counted by
      // the claim. The invocation fails, so the outage is visible rather than a quiet
      // empty run.
      throw new RetryableError(
        ErrorCodes.DB_CONNECTION,
        'database connection lost during a batch; its rows return when their leases expire',
        {
          cause: error,
        },
      );
    }
    if (!c.retryable && rows > 1) return runOneByOne(ctx, logger, lanes);
    // The batch transaction failed as a whole: none of it committed. Record the failed
    // attempt of each lane's first row and hand the rest back (fenced: a commit that did
    // land despite the error leaves nothing PROCESSING to change). If that fails too, the
    // database is unreachable: the leases expire and the reaper returns the rows.
    return { reports: [await failBatch(ctx, lanes, error)], failed: c.retryable };
  }
}

/**
 * A batch refused for its data as a whole (a deferred constraint at COMMIT): nothing says
 * which row was at fault, and quarantining them all would take the innocent rows with it.
 * Nothing committed and the rows are still ours: run each on its own, lane by lane in run
 * order, a lane's rows queued behind the one that runs.
 */
async function runOneByOne(ctx: BatchContext, logger: Logger, lanes: readonly BatchLane[]): Promise<ClaimedBatchResult> {
  const reports: BatchReport[] = [];
  let failed = false;
  for (const lane of lanes) {
    const queue = [...lane.rows, ...lane.rest];
    for (let i = 0; i < queue.length; i++) {
      const one = await runClaimedBatch(ctx, logger, [{ ...lane, rows: [queue[i]!], rest: queue.slice(i + 1) }]);
      reports.push(...one.reports);
      failed ||= one.failed;
      if (one.failed || one.reports.some((r) => r.stopped[0] || r.outOfTime || r.lost.length > 0)) break;
    }
  }
  return { reports, failed };
}
