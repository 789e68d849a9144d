/**
 * Record what became of a relay's claimed rows, in one statement, fenced on the claim:
 * only rows still unpublished and claimed by `owner` change. A relay whose lane was taken
 * over (its lease expired) changes nothing, and sees it in the returned sequence numbers.
 *
 *   published  the broker acknowledged it (acks=all): published_at, claim cleared
 *   refused    the aggregate's head the broker did not take: an attempt counted, due
 *              again after `delaySeconds`, the error kept
 *   returned   not attempted, or behind a refused head: claim cleared, nothing counted
 *
 * Never marks published what the producer did not acknowledge: the relay passes
 * `published` only for messages whose send resolved.
 */
import type { Queryable } from '../lib/db';

export type OutboxOutcome =
  | { outboxSeq: number; outcome: 'published' | 'returned' }
  | { outboxSeq: number; outcome: 'refused'; delaySeconds: number; errorCode: string; errorMessage: string };

export async function completeOutbox(q: Queryable, owner: string, outcomes: readonly OutboxOutcome[]): Promise<number[]> {
  if (outcomes.length === 0) return [];
  const rows = outcomes.map((o) => ({
    outbox_seq: o.outboxSeq,
    outcome: o.outcome,
    delay_seconds: o.outcome === 'refused' ? o.delaySeconds : null,
    error_code: o.outcome === 'refused' ? o.errorCode : null,
    error_message: o.outcome === 'refused' ? o.errorMessage : null,
  }));
  const changed = await q<{ outbox_seq: number }[]>`
    update integration.outbox o
    set published_at = case when v.outcome = 'published' then now() end,
        claimed_by = null,
        claimed_at = null,
        attempt_count = o.attempt_count + case when v.outcome = 'refused' then 1 else 0 end,
        next_attempt_at = case v.outcome
                            when 'refused' then now() + make_interval(secs => v.delay_seconds)
                            when 'published' then null
                            else o.next_attempt_at end,
        last_error_code = case v.outcome when 'refused' then v.error_code when 'published' then null else o.last_error_code end,
        last_error_message = case v.outcome when 'refused' then v.error_message when 'published' then null else o.last_error_message end
    from json_to_recordset(${JSON.stringify(rows)}::text::json)
         as v(outbox_seq bigint, outcome text, delay_seconds float8, error_code text, error_message text)
    where o.outbox_seq = v.outbox_seq
      and o.claimed_by = ${owner}
      and o.published_at is null
    returning o.outbox_seq`;
  return changed.map((r) => r.outbox_seq);
}
