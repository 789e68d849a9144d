/**
 * Retention, in bounded batches: each call changes at most `limit` rows and returns how
 * many it changed, so the caller loops until a short batch or its own deadline.
 *
 * The order of forgetting (docs/reaper.md):
 *   - a finished row (PROCESSED, IGNORED) leaves the inbox after the payload retention:
 *     deleted, its dedupe key (consumer_name, event_id) and final facts moved to
 *     integration.consumed_events in the same statement;
 *   - the key stays there until the dedupe window has passed, so a late redelivery is
 *     still a duplicate (insert-batch.ts checks both tables); then it is deleted;
 *   - raw poison rows are deleted after their own window.
 * QUARANTINED, queued and in-flight rows are never touched here.
 *
 * All of them find their rows through an index range that holds only what is still to
 * do (consumer_inbox_finished_idx, consumed_events_dedupe_until_idx,
 * consumer_raw_poison_created_idx) and lock them with
 * SKIP LOCKED, so a run never waits on anyone and never rescans work an earlier run
 * finished. The batch's keys are collected into an array first (`= any(array(…))`): the
 * change is then a primary-key lookup per row whatever the planner estimates, never a
 * hash join against the whole table. The outer condition repeats the state test, so a
 * row changed between the statement's snapshot and its lock is left alone.
 */
import type postgres from 'postgres';
import type { Queryable } from '../lib/db';
import type { RetentionPolicy } from './types';

/**
 * The payload retention actually applied: never beyond the dedupe window (a row still in
 * the inbox at the end of its window would keep its key past it).
 */
export function effectivePayloadRetentionDays(policy: RetentionPolicy): number {
  return Math.min(policy.payloadRetentionDays, policy.dedupeWindowDays);
}

export interface RetireCounts {
  /** Finished rows deleted from the inbox. */
  left: number;
  /** Of those, the rows whose key was kept in integration.consumed_events (window not over). */
  kept: number;
}

/**
 * Finished rows past the payload retention leave the inbox: each is deleted and its key
 * inserted into integration.consumed_events in the same statement, with dedupe_until =
 * processed_at + the dedupe window; a row whose window is already over (the reaper was
 * down that long) leaves no key. A plain insert, not ON CONFLICT (which logs one more WAL
 * record per key): a key is never kept for an event still in the inbox, since every insert
 * into the inbox is refused for a kept key (insert-batch.ts and the trigger of migration
 * 0110), and a row leaves once. Two ranges of consumer_inbox_finished_idx, so neither
 * walks over rows still to be kept:
 *   - payload_purged_at IS NULL, processed_at past the payload retention: the steady state;
 *   - payload_purged_at IS NOT NULL: rows whose payload an earlier release dropped in place,
 *     all past their payload retention by definition. The range is empty once they have
 *     left; until then this is how a table that already holds rows moves to the key table,
 *     in the same bounded, restartable, SKIP LOCKED batches as the steady state.
 * At most `limit` rows in all.
 */
export async function retireFinished(q: Queryable, consumerName: string, policy: RetentionPolicy, limit: number): Promise<RetireCounts> {
  const fresh = await retire(
    q,
    consumerName,
    policy,
    limit,
    q`payload_purged_at is null and processed_at < now() - make_interval(days => ${effectivePayloadRetentionDays(policy)})`,
    q`processed_at`,
  );
  if (fresh.left >= limit) return fresh;
  const purged = await retire(q, consumerName, policy, limit - fresh.left, q`payload_purged_at is not null`, q`payload_purged_at`);
  return { left: fresh.left + purged.left, kept: fresh.kept + purged.kept };
}

/** Move up to `limit` finished rows of one range of the finished index to the key table. */
async function retire(
  q: Queryable,
  consumerName: string,
  policy: RetentionPolicy,
  limit: number,
  range: postgres.Fragment,
  order: postgres.Fragment,
): Promise<RetireCounts> {
  const windowEnd = q`g.processed_at + make_interval(days => ${policy.dedupeWindowDays})`;
  const [counts] = await q<RetireCounts[]>`
    with gone as (
      delete from integration.consumer_inbox
      where inbox_id = any(array(
          select inbox_id
          from integration.consumer_inbox
          where consumer_name = ${consumerName}
            and status in ('PROCESSED', 'IGNORED')
            and ${range}
          order by ${order}
          limit ${limit}
          for update skip locked))
        and status in ('PROCESSED', 'IGNORED')
      returning consumer_name, event_id, inbox_id, event_type, status, topic_name, partition_no, offset_no,
                received_at, processed_at, quarantined_at, error_code, trace_context
    ), kept as (
      insert into integration.consumed_events (consumer_name, event_id, inbox_id, event_type, status, topic_name,
        partition_no, offset_no, received_at, processed_at, quarantined_at, error_code, trace_context, dedupe_until)
      select g.consumer_name, g.event_id, g.inbox_id, g.event_type, g.status, g.topic_name, g.partition_no, g.offset_no,
             g.received_at, g.processed_at, g.quarantined_at, g.error_code, g.trace_context, ${windowEnd}
      from gone g
      where ${windowEnd} > now()
      returning 1
    )
    select (select count(*) from gone)::int as "left", (select count(*) from kept)::int as kept`;
  return counts!;
}

/**
 * Forget the keys whose dedupe window has ended: a redelivery of the event is new again.
 * The window a key keeps is the one in force when its row left the inbox.
 *
 * Unlike the inbox's batches, these rows are not locked first: nothing but this statement
 * ever locks a key (keys are only inserted and deleted), so a second reaper run at most
 * waits for the first's short statement and then finds those keys gone, and a lock would
 * cost a WAL record per key.
 */
export async function deleteExpiredKeys(q: Queryable, consumerName: string, limit: number): Promise<number> {
  const result = await q`
    delete from integration.consumed_events
    where (consumer_name, event_id) in (
        select consumer_name, event_id
        from integration.consumed_events
        where consumer_name = ${consumerName}
          and dedupe_until <= now()
        order by dedupe_until
        limit ${limit})
      and dedupe_until <= now()`;
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
