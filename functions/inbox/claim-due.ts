/**
 * Claim due rows of one consumer for one worker invocation (the case inbox design's claim, with a lease,
 * per-aggregate serialization and runs). One statement, its own transaction: nothing it
 * locks is held across a round trip, and nothing is shared by all the claimers of a
 * consumer, so several workers of one consumer claim side by side.
 *
 * Why it looks the way it does:
 *
 * - Lanes, not rows. integration.consumer_lane (migration 0050) holds one row per
 *   (consumer, aggregate) with work to look at; consumer_inbox's triggers mark it whenever
 *   a row of the aggregate is queued or leaves PROCESSING, whoever the writer. A claim takes
 *   the oldest due lanes with FOR UPDATE SKIP LOCKED and reads each lane's first queued rows
 *   in head order. Every step is an ordered range of an index whose key is what the lookup
 *   asks for, or a probe of one key: the plan has no join or filter whose cost depends on
 *   the planner guessing how much of the table is due. The backlog can grow from nothing to
 *   millions after the last ANALYZE (an outage, a paused schedule, a TRIM_HORIZON deploy)
 *   and a claim still reads a few index entries per row it takes
 *   (test/db/worker/claim-plan.test.ts holds it to a budget of buffers per claimed row).
 *
 * - Per-aggregate serialization (docs/design.md §3, guarantee 4). An aggregate with a row in flight
 *   (PROCESSING, under any owner, seen through consumer_inbox_in_flight_lane_idx) is not
 *   claimed: its lane waits until that row leaves PROCESSING, which marks it due again. Two
 *   claims cannot both take an aggregate: each needs its lane's row lock (SKIP LOCKED: a
 *   lane being claimed is skipped), and a lane is taken only at the row version this
 *   statement's snapshot saw, so one that another claim has just deleted or changed (or a
 *   writer has marked since) is left for the next claim instead of being judged from reads
 *   that cannot see that change.
 *
 * - Head of line per aggregate. A lane's rows are read from its head: the first queued row
 *   by aggregate_version nulls last, then arrival, then Kafka offset (the rows of one ingest
 *   batch share received_at; an aggregate lives in one partition, so offsets are its order).
 *   The run is the longest prefix of due rows, at most runLimit: a later version never
 *   overtakes an earlier one that is backing off. A lane whose head is not due is not
 *   claimed; its due_at becomes the head's next attempt.
 *
 * - Runs. One lane gives up to runLimit consecutive rows, processed in order in one batch
 *   (process-batch.ts); a hot aggregate no longer costs a claim per row.
 *
 * - Work in proportion to the batch. The CTEs' row estimates are guesses (a few rows), and
 *   a join of two of them is planned as a nested loop comparing every row of one with
 *   every row of the other. So no step joins two: every lane looked at has a row in
 *   window_rows (an empty one when it is in flight or has nothing open), what a lane's rows
 *   say is computed over them by window functions, and the claimed rows are put in claim
 *   order by their key's place in one array of the taken keys (the update finds them by
 *   that array alone: primary-key lookups). test/db/worker/claim-plan.test.ts bounds the
 *   rows the plan visits per claimed row as well as its buffers.
 *
 * - A paused consumer (consumer-pause.ts) takes nothing: the first step reads no lane, and the
 *   result says so, so that a draining worker stops rather than idles.
 *
 * - What the lane says afterwards: a lane whose rows were all taken is deleted; one with
 *   rows left behind its run, or whose aggregate is in flight, waits (due_at null) until a
 *   row leaves PROCESSING; one whose head backs off is due when the head is. Held lanes
 *   (quarantine policy hold-aggregate) are never taken.
 *
 * The lease ends no later than the invocation's own deadline (the caller passes the seconds
 * left), so a lease never outlives the worker that holds it.
 */
import { DEFAULTS } from '../lib/config';
import type { Queryable } from '../lib/db';
import { processingPaused } from './consumer-pause';
import { planOpaque } from '../lib/plan-opaque';
import type { InboxRow } from './types';

export interface ClaimedRow extends InboxRow {
  /** Seconds since the row was received, by the database's clock at claim time. */
  waited_seconds: number;
}

/** The rows of one aggregate a claim took, in the order they must be processed. */
export interface ClaimedLane {
  aggregateType: string;
  aggregateId: string;
  rows: ClaimedRow[];
}

export interface Claim {
  /** Every claimed row, lane by lane, each lane's rows in run order. */
  rows: ClaimedRow[];
  lanes: ClaimedLane[];
  /** Lanes looked at and put right without being claimed: head not due, in flight, or empty. */
  deferredLanes: number;
  /** The consumer's processing is paused (consumer-pause.ts): the claim took nothing. */
  paused: boolean;
}

export interface ClaimOptions {
  consumerName: string;
  owner: string;
  /** Rows per claim. */
  limit: number;
  /** Rows one lane may give to one claim (its run); DEFAULTS.workerRunLength when omitted, never more than limit. */
  runLimit?: number;
  /** Lease length; the caller caps it at the invocation's remaining time. */
  leaseSeconds: number;
}

type ClaimRecord = ClaimedRow & { deferred_lanes: number; paused: boolean };

export async function claimDue(q: Queryable, options: ClaimOptions): Promise<Claim> {
  return toClaim(await claimStatement(q, options));
}

/** The claim's statement, not yet sent (tests EXPLAIN it). */
export function claimStatement(q: Queryable, options: ClaimOptions) {
  const { consumerName, owner, limit } = options;
  const runLimit = Math.max(1, Math.min(options.runLimit ?? DEFAULTS.workerRunLength, limit));
  const leaseSeconds = Math.max(options.leaseSeconds, 0.001);
  return q<ClaimRecord[]>`
    with locked_lanes as materialized (
      select l.ctid as lane_ctid, l.aggregate_type, l.aggregate_id, l.due_at
      from integration.consumer_lane l
      where l.consumer_name = ${consumerName}
        and l.held_by is null
        and l.due_at <= now()
        -- Paused: nothing is taken (evaluated once, before any lane is read or locked).
        and not ${processingPaused(q, consumerName)}
      order by l.due_at
      limit ${limit}
      for update of l skip locked
    ),
    -- FOR UPDATE locks a lane's latest version, which may be newer than this statement's
    -- snapshot (a writer queued or finished rows of it since): such a lane is left as it
    -- is this time. A version the snapshot sees is found again by its ctid; a newer one is not.
    -- Both lookups are LATERAL with LIMIT 1: a probe per lane, which the planner can
    -- neither hash (an EXISTS in the select list may become one scan of every row in
    -- flight or queued, hashed) nor turn into a join reading the whole lane table, whatever
    -- it guesses of the lanes' number.
    lanes as materialized (
      select g.lane_ctid, g.aggregate_type, g.aggregate_id,
             row_number() over (order by g.due_at, g.aggregate_type, g.aggregate_id) as lane_no,
             f.found is not null as in_flight
      from locked_lanes g
      cross join lateral (select 1 from integration.consumer_lane s where s.ctid = g.lane_ctid limit 1) seen
      left join lateral (
        select 1 as found from integration.consumer_inbox p
        where array[p.consumer_name, p.aggregate_type, p.aggregate_id] = array[${consumerName}::text, g.aggregate_type, g.aggregate_id]
          and p.status = 'PROCESSING'
        limit 1
      ) f on true
    ),
    -- Each lane's first open rows in head order: one more than a run, to see whether
    -- anything follows it. The condition (statuses included) and the ORDER BY are
    -- consumer_inbox_open_lane_idx's (migration 0050 says why). A lane in flight is not
    -- read, and a lane in flight or without open rows gives one empty row: every lane
    -- looked at is here, so that what follows reads one CTE and never joins two (planned
    -- on a CTE's estimate of a few rows, such a join runs as a nested loop, comparing every
    -- lane with every row: quadratic in the batch).
    window_rows as materialized (
      select g.lane_no, g.lane_ctid, g.in_flight as lane_in_flight, r.inbox_id, r.status,
             row_number() over (partition by g.lane_no order by r.aggregate_version, r.received_at, r.offset_no) as pos,
             r.status = 'RECEIVED' or (r.status = 'RETRY_PENDING' and r.next_attempt_at <= now()) as due,
             coalesce(r.next_attempt_at, now()) as due_at
      from lanes g
      left join lateral (
        select d.inbox_id, d.status, d.next_attempt_at, d.aggregate_version, d.received_at, d.offset_no
        from integration.consumer_inbox d
        where not g.in_flight
          and array[d.consumer_name, d.aggregate_type, d.aggregate_id] = array[${consumerName}::text, g.aggregate_type, g.aggregate_id]
          and d.status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING')
        order by d.aggregate_version, d.received_at, d.offset_no
        limit ${runLimit + 1}
      ) r on true
    ),
    -- What each lane's rows say, on every row of the lane.
    lane_rows as materialized (
      select w.*,
             -- the run: due rows from the head on, up to the first that is not due
             coalesce(min(w.pos) filter (where not w.due) over lane, count(w.inbox_id) over lane + 1) - 1 as clear_rows,
             count(w.inbox_id) over lane as open_rows,
             count(w.inbox_id) filter (where w.status <> 'PROCESSING') over lane as queued_rows,
             coalesce(bool_or(w.status = 'PROCESSING') over lane, false) as rows_in_flight,
             min(w.due_at) filter (where w.pos = 1) over lane as head_due_at
      from window_rows w
      window lane as (partition by w.lane_no)
    ),
    -- The runs, lane by lane, cut at the claim's limit. A run is at most the batch's share
    -- of the lanes that have one (and at most runLimit), so that a batch is spread over as
    -- many aggregates as it can be: its stages are the rows of its longest run, each stage
    -- a round trip (process-batch.ts).
    picked as materialized (
      select r.*,
             r.in_run and sum(r.in_run::int) over (order by r.lane_no, r.pos rows between unbounded preceding and current row) <= ${limit} as taken
      from (
        select l.*,
               l.inbox_id is not null and not l.lane_in_flight and not l.rows_in_flight
                 and l.pos <= least(l.clear_rows, ${runLimit}, ceil(${limit}::numeric / greatest(l.runnable_lanes, 1))) as in_run
        from (
          select l.*,
                 count(*) filter (where l.pos = 1 and l.clear_rows > 0 and not l.lane_in_flight and not l.rows_in_flight) over () as runnable_lanes
          from lane_rows l
        ) l
      ) r
    ),
    lane_state as materialized (
      select p.*, count(*) filter (where p.taken) over (partition by p.lane_no) as taken_rows
      from picked p
    ),
    -- The taken rows' keys in claim order (lane, then place in its run): the update finds
    -- its rows by primary key alone, and the result is ordered by the key's position here
    -- (joined back to lane_state instead, every claimed row would be compared with every
    -- row of it: a nested loop, planned on the CTEs' guessed few rows).
    taken_ids as materialized (
      select array(select t.inbox_id from lane_state t where t.taken order by t.lane_no, t.pos) as ids
    ),
    claimed as (
      update integration.consumer_inbox i
      set status = 'PROCESSING',
          attempt_count = i.attempt_count + 1,
          locked_by = ${owner},
          locked_at = now(),
          lease_expires_at = now() + make_interval(secs => ${leaseSeconds}),
          updated_at = now()
      where i.inbox_id = any((select x.ids from taken_ids x)::uuid[])
        -- Not a plain IN list: it would let consumer_inbox_retry_idx (every due row) join
        -- the primary-key lookups in a bitmap AND (plan-opaque.ts).
        and ${planOpaque(q, q`i.status in ('RECEIVED', 'RETRY_PENDING')`)}
      returning i.inbox_id, i.consumer_name, i.event_id, i.event_type, i.event_version,
                i.aggregate_type, i.aggregate_id, i.aggregate_version, i.topic_name, i.partition_no,
                i.offset_no, i.correlation_id, i.causation_id, i.producer, i.tenant_id, i.occurred_at,
                i.received_at, i.status, i.attempt_count, i.next_attempt_at, i.locked_by, i.locked_at,
                i.lease_expires_at, i.error_code, i.payload,
                extract(epoch from now() - i.received_at)::float8 as waited_seconds
    ),
    -- Each lane looked at (its first row), and what it says from now on. Lanes cut off by
    -- the batch limit (due rows, none taken, not in flight) stay as they are: due.
    outcome as materialized (
      select l.lane_ctid,
             case
               -- every queued row taken: nothing left to look at until something is queued
               when l.taken_rows > 0 and l.taken_rows = l.queued_rows then 'delete'
               -- rows wait behind the run, or behind rows in flight: until a row leaves PROCESSING
               when l.taken_rows > 0 or l.lane_in_flight or l.rows_in_flight then 'wait'
               -- nothing queued, nothing in flight
               when l.open_rows = 0 then 'delete'
               -- its head backs off
               when l.clear_rows = 0 then 'head'
             end as action,
             l.head_due_at
      from lane_state l
      where l.pos = 1
    ),
    emptied as (
      delete from integration.consumer_lane l
      where l.ctid = any(array(select o.lane_ctid from outcome o where o.action = 'delete'))
    ),
    set_aside as (
      update integration.consumer_lane l
      set due_at = case o.action when 'head' then o.head_due_at end, updated_at = now()
      from outcome o
      where l.ctid = o.lane_ctid
        and o.action in ('wait', 'head')
      returning 1
    )
    -- One row at least, so that a claim that took nothing still says how many lanes it put
    -- right, and whether the consumer is paused.
    select c.*, s.n as deferred_lanes, s.paused
    from (select count(*)::int as n, ${processingPaused(q, consumerName)} as paused from set_aside) s
    left join claimed c on true
    order by array_position((select x.ids from taken_ids x), c.inbox_id)`;
}

function toClaim(records: readonly ClaimRecord[]): Claim {
  const lanes: ClaimedLane[] = [];
  const rows: ClaimedRow[] = [];
  let current: ClaimedLane | undefined;
  for (const record of records) {
    if (record.inbox_id === null) continue; // the claim took nothing
    const { deferred_lanes: _deferred, paused: _paused, ...row } = record;
    // Rows come lane by lane, each lane's run in order: a lane starts where the aggregate changes.
    if (current === undefined || current.aggregateType !== row.aggregate_type || current.aggregateId !== row.aggregate_id) {
      current = { aggregateType: row.aggregate_type, aggregateId: row.aggregate_id, rows: [] };
      lanes.push(current);
    }
    current.rows.push(row);
    rows.push(row);
  }
  return { rows, lanes, deferredLanes: records[0]?.deferred_lanes ?? 0, paused: records[0]?.paused ?? false };
}
