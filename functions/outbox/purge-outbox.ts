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
  // Through integration.delete_published_outbox (migration 0200): a relay's role holds no
  // table-level DELETE on the outbox, which would let it lock the table.
  const [row] = await q<{ n: number }[]>`select integration.delete_published_outbox(${consumerName}, ${days}, ${limit}) as n`;
  return row!.n;
}
