/**
 * Retention, in bounded batches: each call changes at most `limit` rows and returns how
 * many it changed, so the caller loops until a short batch or its own deadline.
 *
 * The order of forgetting (docs/reaper.md):
 *   1. a finished row (PROCESSED, IGNORED) loses payload, headers and error detail after
 *      the payload retention, and is marked payload_purged_at;
 *   2. its dedupe key (consumer_name, event_id) stays until the dedupe window has passed,
 *      so a late redelivery still meets the unique key and is a duplicate; then the row
 *      is deleted;
 *   3. raw poison rows are deleted after their own window.
 * QUARANTINED, queued and in-flight rows are never touched here.
 *
 * All three find their rows through a partial index whose ranges hold only what is
 * still to do (consumer_inbox_finished_idx, consumer_raw_poison_created_idx), and take
 * row locks with SKIP LOCKED, so a run never waits on anyone and never rescans work an
 * earlier run finished.
 */
import type { Queryable } from '../lib/db';
import type { RetentionPolicy } from '../consumers/types';

/**
 * The payload retention actually applied: never beyond the dedupe window (a row is
 * deleted then anyway, and the delete step reads the purge time; see deleteFinished).
 */
export function effectivePayloadRetentionDays(policy: RetentionPolicy): number {
  return Math.min(policy.payloadRetentionDays, policy.dedupeWindowDays);
}

/** Step 1: drop the heavy columns of finished rows older than the payload retention. */
export async function purgePayloads(q: Queryable, consumerName: string, policy: RetentionPolicy, limit: number): Promise<number> {
  const result = await q`
    with due as (
      select inbox_id
      from integration.consumer_inbox
      where consumer_name = ${consumerName}
        and status in ('PROCESSED', 'IGNORED')
        and payload_purged_at is null
        and processed_at < now() - make_interval(days => ${effectivePayloadRetentionDays(policy)})
      order by processed_at
      limit ${limit}
      for update skip locked
    )
    update integration.consumer_inbox i
    set payload = '{}'::jsonb,
        headers = '{}'::jsonb,
        error_detail = null,
        payload_purged_at = now(),
        updated_at = now()
    from due d
    where i.inbox_id = d.inbox_id`;
  return result.count;
}

/**
 * Step 2: delete finished rows whose dedupe window has passed.
 *
 * The condition on processed_at is the rule; the one on payload_purged_at is what makes
 * it cheap. A row is purged no earlier than payload retention after it finished, so
 * `payload_purged_at < now() - (window - retention)` selects a superset-in-waiting of
 * the rows past their window and is a range of the index's second column. Rows purged
 * late (the reaper was down) are deleted correspondingly late: later, never earlier.
 */
export async function deleteFinished(q: Queryable, consumerName: string, policy: RetentionPolicy, limit: number): Promise<number> {
  const keptAfterPurgeDays = policy.dedupeWindowDays - effectivePayloadRetentionDays(policy);
  const result = await q`
    with due as (
      select inbox_id
      from integration.consumer_inbox
      where consumer_name = ${consumerName}
        and status in ('PROCESSED', 'IGNORED')
        and payload_purged_at < now() - make_interval(days => ${keptAfterPurgeDays})
        and processed_at < now() - make_interval(days => ${policy.dedupeWindowDays})
      order by payload_purged_at
      limit ${limit}
      for update skip locked
    )
    delete from integration.consumer_inbox i
    using due d
    where i.inbox_id = d.inbox_id`;
  return result.count;
}

/** Step 3: delete raw poison rows older than the poison retention. */
export async function deletePoison(q: Queryable, consumerName: string, policy: RetentionPolicy, limit: number): Promise<number> {
  const result = await q`
    with due as (
      select poison_id
      from integration.consumer_raw_poison
      where consumer_name = ${consumerName}
        and created_at < now() - make_interval(days => ${policy.poisonRetentionDays})
      order by created_at
      limit ${limit}
      for update skip locked
    )
    delete from integration.consumer_raw_poison p
    using due d
    where p.poison_id = d.poison_id`;
  return result.count;
}
