/**
 * An inline consumer's new rows, processed in the ingest transaction that stored them.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { dispatch } from '../framework/dispatch';
import type { RowSpans } from '../framework/row-spans';
import { outcomeForFailure } from '../framework/outcome';
import type { ConsumerDeclaration } from '../framework/types';
import { completeRows } from '../inbox/complete';
import { deferBehindAggregate } from '../inbox/defer-behind-aggregate';
import type { InboxRow, Outcome } from '../inbox/types';
import type { TransactionSql } from '../lib/db';
import { isConnectionError } from '../lib/errors';

/**
 * Process the new rows in the ingest transaction: each in a savepoint, all outcomes in one
 * statement. A row that is not alone at the head of its aggregate is left RECEIVED for the
 * worker, which serializes an aggregate's rows (docs/design.md §3, guarantee 4).
 */
export async function processInline(
  tx: TransactionSql,
  consumer: ConsumerDeclaration,
  logger: Pick<Logger, 'warn'>,
  rows: InboxRow[],
  owner: string,
  spans: RowSpans,
): Promise<Outcome[]> {
  const deferred = new Set(
    await deferBehindAggregate(
      tx,
      owner,
      rows.map((r) => r.inbox_id),
    ),
  );
  const outcomes: Outcome[] = [];
  for (const row of rows) {
    if (deferred.has(row.inbox_id)) continue;
    try {
      const status = await tx.savepoint((sp) => dispatch(consumer, sp, row, spans.traceOf(row)));
      outcomes.push({ inboxId: row.inbox_id, status });
    } catch (error) {
      // A broken connection is the batch's problem; anything else is this row's.
      if (isConnectionError(error)) throw error;
      const outcome = outcomeForFailure(consumer.retry, { inboxId: row.inbox_id, attempt: 1, waitedSeconds: 0 }, error);
      outcomes.push(outcome);
      logger.warn('inline processing failed', {
        ...spans.logKeys(row),
        eventId: row.event_id,
        eventType: row.event_type,
        topic: row.topic_name,
        partition: row.partition_no,
        offset: row.offset_no,
        correlationId: row.correlation_id,
        attempt: 1,
        status: outcome.status,
        errorCode: 'errorCode' in outcome ? outcome.errorCode : undefined,
      });
    }
  }
  await completeRows(tx, owner, outcomes);
  return outcomes;
}
