/**
 * Retention for the outbox: published rows older than the emitting consumer's
 * `publishedOutboxDays` are deleted, in bounded batches, oldest first (like the reaper's
 * deletion of finished inbox rows). Unpublished rows are never deleted. The event id stays
 * unique only while its row exists: after this, reprocessing the same inbox row (possible
 * only once its own dedupe window has passed) would emit the same id again, which is what
 * downstream deduplicates anyway.
 */
import type { Queryable } from '../lib/db';

export async function deletePublishedOutbox(q: Queryable, consumerName: string, days: number, limit: number): Promise<number> {
  const result = await q`
    delete from integration.outbox o
    where o.outbox_seq = any(array(
        select p.outbox_seq
        from integration.outbox p
        where p.consumer_name = ${consumerName}
          and p.published_at < now() - make_interval(days => ${days})
        order by p.published_at
        limit ${limit}))`;
  return result.count;
}
