/**
 * Retention, in bounded batches: each call changes at most `limit` rows and returns how
 * many it changed, so the caller loops until a short batch or its own deadline.
 *
 * The order of forgetting (docs/reaper.md):
 *   - a finished row (PROCESSED, IGNORED) loses payload, headers and error detail after
 *     the payload retention, and is marked payload_purged_at;
 *   - its dedupe key (consumer_name, event_id) stays until the dedupe window has passed,
 *     so a late redelivery still meets the unique key and is a duplicate; then the row
 *     is deleted;
 *   - raw poison rows are deleted after their own window.
 * QUARANTINED, queued and in-flight rows are never touched here.
 *
 * All of them find their rows through an index range that holds only what is still to
 * do (consumer_inbox_finished_idx, consumer_raw_poison_created_idx) and lock them with
 * SKIP LOCKED, so a run never waits on anyone and never rescans work an earlier run
 * finished. The batch's keys are collected into an array first (`= any(array(…))`): the
 * change is then a primary-key lookup per row whatever the planner estimates, never a
 * hash join against the whole table. The outer condition repeats the state test, so a
 * row changed between the statement's snapshot and its lock is left alone.
 */
import type postgres from 'postgres';
import type { Queryable } from '../lib/db';
import type { RetentionPolicy } from '../consumers/types';

/**
 * The payload retention actually applied: never beyond the dedupe window (the row is
 * deleted then anyway; deleteFinished relies on purge time <= end of the window).
 */
export function effectivePayloadRetentionDays(policy: RetentionPolicy): number {
  return Math.min(policy.payloadRetentionDays, policy.dedupeWindowDays);
}

/**
 * Drop the heavy columns of finished rows older than the payload retention. Setting
 * payload_purged_at is the whole statement: the table's trigger writes the purged form
 * (empty payload and headers, no error detail), and the reaper's role may not write a
 * payload or headers at all (migrations/0130).
 */
export async function purgePayloads(q: Queryable, consumerName: string, policy: RetentionPolicy, limit: number): Promise<number> {
  const result = await q`
    update integration.consumer_inbox
    set payload_purged_at = now(),
        updated_at = now()
    where inbox_id = any(array(
        select inbox_id
        from integration.consumer_inbox
        where consumer_name = ${consumerName}
          and status in ('PROCESSED', 'IGNORED')
          and payload_purged_at is null
          and processed_at < now() - make_interval(days => ${effectivePayloadRetentionDays(policy)})
        order by processed_at
        limit ${limit}
        for update skip locked))
      and payload_purged_at is null`;
  return result.count;
}

/**
 * Delete finished rows whose dedupe window has passed (processed_at older than
 * the window), in two index ranges so that neither walks over rows still to be kept:
 *   - not yet purged: (payload_purged_at IS NULL, processed_at < window), normally empty,
 *     but it is where rows land when the reaper was down for longer than the window;
 *   - purged: payload_purged_at < now() - (window - payload retention). A row is purged
 *     no earlier than payload retention after it finished, so this range holds every
 *     purged row past its window and few others; processed_at is still checked, so a
 *     change of policy can make a row be deleted later, never earlier.
 * At most `limit` rows in all.
 */
export async function deleteFinished(q: Queryable, consumerName: string, policy: RetentionPolicy, limit: number): Promise<number> {
  const unpurged = await deletePastWindow(q, consumerName, policy, limit, q`payload_purged_at is null`, q`processed_at`);
  if (unpurged >= limit) return unpurged;
  const keptAfterPurgeDays = policy.dedupeWindowDays - effectivePayloadRetentionDays(policy);
  const purged = await deletePastWindow(
    q,
    consumerName,
    policy,
    limit - unpurged,
    q`payload_purged_at < now() - make_interval(days => ${keptAfterPurgeDays})`,
    q`payload_purged_at`,
  );
  return unpurged + purged;
}

/** Delete up to `limit` finished rows past the dedupe window from one range of the finished index. */
async function deletePastWindow(
  q: Queryable,
  consumerName: string,
  policy: RetentionPolicy,
  limit: number,
  range: postgres.Fragment,
  order: postgres.Fragment,
): Promise<number> {
  const result = await q`
    delete from integration.consumer_inbox
    where inbox_id = any(array(
        select inbox_id
        from integration.consumer_inbox
        where consumer_name = ${consumerName}
          and status in ('PROCESSED', 'IGNORED')
          and ${range}
          and processed_at < now() - make_interval(days => ${policy.dedupeWindowDays})
        order by ${order}
        limit ${limit}
        for update skip locked))
      and status in ('PROCESSED', 'IGNORED')`;
  return result.count;
}

/** Delete raw poison rows older than the poison retention. */
export async function deletePoison(q: Queryable, consumerName: string, policy: RetentionPolicy, limit: number): Promise<number> {
  const result = await q`
    delete from integration.consumer_raw_poison
    where poison_id = any(array(
        select poison_id
        from integration.consumer_raw_poison
        where consumer_name = ${consumerName}
          and created_at < now() - make_interval(days => ${policy.poisonRetentionDays})
        order by created_at
        limit ${limit}
        for update skip locked))`;
  return result.count;
}
