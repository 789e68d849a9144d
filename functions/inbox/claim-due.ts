/**
 * Claim due rows of one consumer for one worker invocation (seed 000's claim, with a lease
 * and per-aggregate serialization).
 *
 * Why it looks the way it does:
 *
 * - FOR UPDATE SKIP LOCKED over RECEIVED and due RETRY_PENDING rows, oldest first, as in
 *   seed 000; the rows become PROCESSING under `owner` with attempt_count + 1 and a lease
 *   that ends no later than the invocation's own deadline (the caller passes the seconds
 *   left), so a lease never outlives the worker that holds it.
 *
 * - Per-aggregate serialization (DESIGN.md §6.4). A claim takes at most ONE row per
 *   (aggregate_type, aggregate_id), and none of an aggregate that already has a PROCESSING
 *   row (live or expired lease: an expired one may still sit in a batch transaction that is
 *   about to commit; the reaper returns it).
 *
 * - Head of line per aggregate. An aggregate's head is its first NON-TERMINAL row
 *   (RECEIVED or RETRY_PENDING, due or not) by aggregate_version nulls last, then arrival,
 *   then Kafka offset: the rows of one ingest batch share their received_at (the batch's
 *   now()) and were inserted in event_id order, so without the offset an unversioned event
 *   could overtake an earlier one delivered in the same batch (an aggregate lives in one
 *   partition, so its offsets are its order). The partial index serves the prefix; only
 *   rows tied on it are sorted.
 *   The aggregate is claimed only when its head is due, and then only the head; later rows
 *   wait behind it. Picking the first DUE row instead would let v4 overtake a v3 that is
 *   backing off after a transient failure: v4 would meet a version gap and, after the
 *   bounded wait, be quarantined although its predecessor was in the inbox all along (and
 *   an unversioned event would simply be applied before an earlier one). So a gap is met
 *   only when the predecessor is genuinely absent: not yet ingested, or QUARANTINED.
 *
 * - Two claimers could both see "nothing of aggregate X in flight" and each take a
 *   different row of X (SKIP LOCKED would let the second skip the first's row and take the
 *   next one). Claims of one consumer therefore serialize on a transaction-scoped row lock
 *   of integration.consumer_claim_lock. It is held for one short statement; it is a row
 *   lock, so it never pins a session behind RDS Proxy (no session advisory lock). The claim
 *   statement runs after the lock is granted, so its snapshot sees every earlier claim.
 *
 * - Cost stays bounded by the batch, not by the backlog: the oldest `window` due rows of
 *   aggregates not in flight and whose head is due are read from a partial index in
 *   arrival order, their aggregates picked, and each picked aggregate's head found by a
 *   second partial index (one index descent per row, the head being the index's first
 *   entry for the aggregate). A hot aggregate's window-filling backlog costs one batch
 *   slot, not the batch; the rows of a blocked or in-flight aggregate are stepped over
 *   before the window is cut, so they cannot hide the other aggregates.
 *
 * - The head is locked with SKIP LOCKED only after it has been chosen: a head locked by
 *   someone else (an operator's replay, say) skips its aggregate for this claim rather
 *   than letting the next row of that aggregate overtake it.
 */
import type { Sql } from '../lib/db';
import type { InboxRow } from './types';

export interface ClaimedRow extends InboxRow {
  /** Seconds since the row was received, by the database's clock at claim time. */
  waited_seconds: number;
}

export interface ClaimOptions {
  consumerName: string;
  owner: string;
  limit: number;
  /** Lease length; the caller caps it at the invocation's remaining time. */
  leaseSeconds: number;
  /** How many of the oldest due rows to consider; defaults to 4 × limit. */
  window?: number;
}

export async function claimDue(sql: Sql, options: ClaimOptions): Promise<ClaimedRow[]> {
  const { consumerName, owner, limit } = options;
  const window = options.window ?? limit * 4;
  const leaseSeconds = Math.max(options.leaseSeconds, 0.001);
  return sql.begin(async (tx) => {
    // An aggregate's head, in one place: the window's "is the head due" test and the head
    // lookup must agree. Unqualified, the columns are those of each subquery's own row.
    const headOrder = tx`aggregate_version nulls last, received_at, offset_no`;
    // Issued together (one round trip); the server runs them in order, so the claim's
    // snapshot is taken after the lock is granted.
    const [, claimed] = await Promise.all([
      tx`
        insert into integration.consumer_claim_lock as l (consumer_name) values (${consumerName})
        on conflict (consumer_name) do update set last_claim_at = now()`,
      tx<ClaimedRow[]>`
        with arrived as (
          select a.aggregate_type, a.aggregate_id, a.received_at
          from integration.consumer_inbox a
          where a.consumer_name = ${consumerName}
            and a.status in ('RECEIVED', 'RETRY_PENDING')
            and (a.next_attempt_at is null or a.next_attempt_at <= now())
            -- Before the limit: a backlog of one aggregate in flight or blocked behind a
            -- head that is backing off must not fill the window and hide every other
            -- aggregate's rows behind it.
            and not exists (
              select 1 from integration.consumer_inbox p
              where p.consumer_name = ${consumerName}
                and p.status = 'PROCESSING'
                and p.aggregate_type = a.aggregate_type
                and p.aggregate_id = a.aggregate_id)
            and (
              select h.next_attempt_at is null or h.next_attempt_at <= now()
              from integration.consumer_inbox h
              where h.consumer_name = ${consumerName}
                and h.aggregate_type = a.aggregate_type
                and h.aggregate_id = a.aggregate_id
                and h.status in ('RECEIVED', 'RETRY_PENDING')
              order by ${headOrder}
              limit 1)
          order by a.received_at
          limit ${window}
        ),
        aggregates as (
          select a.aggregate_type, a.aggregate_id, min(a.received_at) as first_received_at
          from arrived a
          group by a.aggregate_type, a.aggregate_id
          order by first_received_at
          limit ${limit}
        ),
        head as (
          select h.inbox_id
          from aggregates g
          cross join lateral (
            select d.inbox_id
            from integration.consumer_inbox d
            where d.consumer_name = ${consumerName}
              and d.aggregate_type = g.aggregate_type
              and d.aggregate_id = g.aggregate_id
              and d.status in ('RECEIVED', 'RETRY_PENDING')
            order by ${headOrder}
            limit 1
          ) h
        ),
        candidate as (
          select i.inbox_id
          from integration.consumer_inbox i
          join head h on h.inbox_id = i.inbox_id
          where i.status in ('RECEIVED', 'RETRY_PENDING')
            and (i.next_attempt_at is null or i.next_attempt_at <= now())
          for update of i skip locked
        )
        update integration.consumer_inbox i
        set status = 'PROCESSING',
            attempt_count = i.attempt_count + 1,
            locked_by = ${owner},
            locked_at = now(),
            lease_expires_at = now() + make_interval(secs => ${leaseSeconds}),
            updated_at = now()
        from candidate c
        where i.inbox_id = c.inbox_id
          and i.status in ('RECEIVED', 'RETRY_PENDING')
        returning i.inbox_id, i.consumer_name, i.event_id, i.event_type, i.event_version,
                  i.aggregate_type, i.aggregate_id, i.aggregate_version, i.topic_name, i.partition_no,
                  i.offset_no, i.correlation_id, i.causation_id, i.producer, i.tenant_id, i.occurred_at,
                  i.received_at, i.status, i.attempt_count, i.next_attempt_at, i.locked_by, i.locked_at,
                  i.lease_expires_at, i.error_code, i.payload,
                  extract(epoch from now() - i.received_at)::float8 as waited_seconds`,
    ]);
    // Oldest first, as claimed; update … returning does not promise an order.
    return [...claimed].sort((a, b) => a.received_at.getTime() - b.received_at.getTime());
  });
}
