/**
 * Claim due rows of one consumer for one worker invocation: the case inbox design's
 * FOR UPDATE SKIP LOCKED claim, over lanes, with a lease, per-aggregate serialization and
 * runs. One statement, its own transaction, composed of the named steps below. Why each
 * step looks the way it does is docs/worker.md ("Lanes: what the claim reads"); the
 * invariants a change must keep:
 *
 * - Every lookup is an ordered range or a probe of an index whose key is what it asks
 *   (the lane key, functions/lib/lane-key.ts), so no plan depends on fresh statistics;
 *   test/db/worker/claim-plan.test.ts holds the claim to a budget of buffers and rows
 *   visited per claimed row.
 * - No step joins two CTEs (planned on guessed few rows, such a join is quadratic in the
 *   batch): every lane looked at keeps a row through the steps, and window functions say
 *   what its rows say.
 * - An aggregate with a row in flight is not claimed; a lane is taken only at the row
 *   version this statement's snapshot saw; a run never passes a row that is not due.
 * - A paused consumer takes nothing, and the result says so.
 * - The lease ends no later than the invocation's deadline (the caller passes the seconds
 *   left), so a lease never outlives the worker that holds it.
 */
import { DEFAULTS } from '../lib/config';
import type { Queryable } from '../lib/db';
import { processingPaused } from './consumer-pause';
import { laneKey, laneKeyOf } from '../lib/lane-key';
import { ownConsumer } from '../lib/own-consumer';
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
  runLength?: number;
  /** Lease length; the caller caps it at the invocation's remaining time. */
  leaseSeconds: number;
}

type ClaimRecord = ClaimedRow & { deferred_lanes: number; paused: boolean };

export async function claimDue(q: Queryable, options: ClaimOptions): Promise<Claim> {
  return toClaim(await claimStatement(q, options));
}

/** The lane key's columns (functions/lib/lane-key.ts), which lead the claim's lane indexes. */
export { LANE_KEY_COLUMNS } from '../lib/lane-key';

/** `alias`'s row is in one of `consumerName`'s lanes, the lane row `g`: an index condition. */
function inLane(q: Queryable, alias: string, consumerName: string) {
  return q`${laneKeyOf(q, alias)} = ${laneKey(q, q`${consumerName}::text`, q('g.aggregate_type'), q('g.aggregate_id'))}`;
}

/** The claim's statement, not yet sent (tests EXPLAIN it). */
export function claimStatement(q: Queryable, options: ClaimOptions) {
  const { consumerName, owner, limit } = options;
  const runLength = Math.max(1, Math.min(options.runLength ?? DEFAULTS.workerRunLength, limit));
  const leaseSeconds = Math.max(options.leaseSeconds, 0.001);
  return q<ClaimRecord[]>`
    with ${lockedLanes(q, consumerName, limit)},
    ${lanesSeen(q, consumerName)},
    ${windowRows(q, consumerName, runLength)},
    ${laneRows(q)},
    ${picked(q, limit, runLength)},
    ${takenIds(q)},
    ${claimed(q, owner, leaseSeconds)},
    ${laneOutcome(q, consumerName)}
    -- One row at least, so that a claim that took nothing still says how many lanes it put
    -- right, and whether the consumer is paused. Joined with emptied so that it runs (a
    -- function call, not a data-modifying WITH, which would run anyway).
    select c.*, s.n as deferred_lanes, s.paused
    from (select count(*)::int as n, ${processingPaused(q, consumerName)} as paused from set_aside) s
    cross join emptied e
    left join claimed c on true
    order by array_position((select x.ids from taken_ids x), c.inbox_id)`;
}

/** The oldest due lanes, locked, skipping those another claim holds; none when paused. */
function lockedLanes(q: Queryable, consumerName: string, limit: number) {
  return q`locked_lanes as materialized (
      select l.ctid as lane_ctid, l.aggregate_type, l.aggregate_id, l.due_at
      from integration.consumer_lane l
      where l.consumer_name = ${ownConsumer(q, consumerName)}
        and l.held_by is null
        and l.due_at <= now()
        -- Paused: nothing is taken (evaluated once, before any lane is read or locked).
        and not ${processingPaused(q, consumerName)}
      order by l.due_at
      limit ${limit}
      for update of l skip locked
    )`;
}

/**
 * The locked lanes this statement's snapshot saw (FOR UPDATE locks the latest version,
 * which a writer may have changed since; found again by ctid, or left for the next claim),
 * numbered in claim order, each with whether its aggregate has a row in flight. Both are
 * LATERAL probes with LIMIT 1, which the planner can neither hash nor join over the table.
 */
function lanesSeen(q: Queryable, consumerName: string) {
  return q`lanes as materialized (
      select g.lane_ctid, g.aggregate_type, g.aggregate_id,
             row_number() over (order by g.due_at, g.aggregate_type, g.aggregate_id) as lane_no,
             f.found is not null as in_flight
      from locked_lanes g
      cross join lateral (select 1 from integration.consumer_lane s where s.ctid = g.lane_ctid limit 1) seen
      left join lateral (
        select 1 as found from integration.consumer_inbox p
        where ${inLane(q, 'p', consumerName)}
          and p.status = 'PROCESSING'
        limit 1
      ) f on true
    )`;
}

/**
 * Each lane's first open rows in head order (version, arrival, offset), one more than a run
 * to see whether anything follows: consumer_inbox_open_lane_idx's condition and order. A lane
 * in flight or with no open rows gives one empty row, so every lane stays in the steps.
 */
function windowRows(q: Queryable, consumerName: string, runLength: number) {
  return q`window_rows as materialized (
      select g.lane_no, g.lane_ctid, g.in_flight as lane_in_flight, r.inbox_id, r.status,
             row_number() over (partition by g.lane_no order by r.aggregate_version, r.received_at, r.offset_no) as pos,
             r.status = 'RECEIVED' or (r.status = 'RETRY_PENDING' and r.next_attempt_at <= now()) as due,
             coalesce(r.next_attempt_at, now()) as due_at
      from lanes g
      left join lateral (
        select d.inbox_id, d.status, d.next_attempt_at, d.aggregate_version, d.received_at, d.offset_no
        from integration.consumer_inbox d
        where not g.in_flight
          and ${inLane(q, 'd', consumerName)}
          and d.status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING')
        order by d.aggregate_version, d.received_at, d.offset_no
        limit ${runLength + 1}
      ) r on true
    )`;
}

/** What each lane's rows say, on every row of the lane. */
function laneRows(q: Queryable) {
  return q`lane_rows as materialized (
      select w.*,
             -- the run: due rows from the head on, up to the first that is not due
             coalesce(min(w.pos) filter (where not w.due) over lane, count(w.inbox_id) over lane + 1) - 1 as clear_rows,
             count(w.inbox_id) over lane as open_rows,
             count(w.inbox_id) filter (where w.status <> 'PROCESSING') over lane as queued_rows,
             coalesce(bool_or(w.status = 'PROCESSING') over lane, false) as rows_in_flight,
             min(w.due_at) filter (where w.pos = 1) over lane as head_due_at
      from window_rows w
      window lane as (partition by w.lane_no)
    )`;
}

/**
 * The runs, lane by lane, cut at the claim's limit. A run is at most the batch's share of
 * the lanes that have one (and at most runLength), so a batch spreads over as many
 * aggregates as it can: its waves are the rows of its longest run (process-batch.ts).
 */
function picked(q: Queryable, limit: number, runLength: number) {
  return q`picked as materialized (
      select r.*,
             r.in_run and sum(r.in_run::int) over (order by r.lane_no, r.pos rows between unbounded preceding and current row) <= ${limit} as taken
      from (
        select l.*,
               l.inbox_id is not null and not l.lane_in_flight and not l.rows_in_flight
                 and l.pos <= least(l.clear_rows, ${runLength}, ceil(${limit}::numeric / greatest(l.runnable_lanes, 1))) as in_run
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
    )`;
}

/**
 * The taken rows' keys in claim order (lane, then place in its run): the update finds its
 * rows by primary key alone, and the result is ordered by the key's place here.
 */
function takenIds(q: Queryable) {
  return q`taken_ids as materialized (
      select array(select t.inbox_id from lane_state t where t.taken order by t.lane_no, t.pos) as ids
    )`;
}

/** The taken rows move to PROCESSING under `owner`'s lease. */
function claimed(q: Queryable, owner: string, leaseSeconds: number) {
  return q`claimed as (
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
                i.lease_expires_at, i.error_code, i.payload, i.headers, i.trace_context,
                extract(epoch from now() - i.received_at)::float8 as waited_seconds
    )`;
}

/**
 * What each lane looked at says from now on: deleted when its queued rows were all taken
 * or nothing is open; waiting (due_at null) with rows behind its run or in flight; due
 * when its head is, when the head backs off. Lanes cut off by the limit stay due.
 *
 * The deletion goes through integration.delete_claimed_lanes (migration 0200): a worker's
 * role holds no table-level DELETE on the lanes, which would let it lock the table.
 */
function laneOutcome(q: Queryable, consumerName: string) {
  return q`outcome as materialized (
      select l.lane_ctid,
             case
               when l.taken_rows > 0 and l.taken_rows = l.queued_rows then 'delete'
               when l.taken_rows > 0 or l.lane_in_flight or l.rows_in_flight then 'wait'
               when l.open_rows = 0 then 'delete'
               when l.clear_rows = 0 then 'head'
             end as action,
             l.head_due_at
      from lane_state l
      where l.pos = 1
    ),
    emptied as materialized (
      select integration.delete_claimed_lanes(${consumerName}::text,
               array(select o.lane_ctid from outcome o where o.action = 'delete')) as n
    ),
    set_aside as (
      update integration.consumer_lane l
      set due_at = case o.action when 'head' then o.head_due_at end, updated_at = now()
      from outcome o
      where l.ctid = o.lane_ctid
        and o.action in ('wait', 'head')
      returning 1
    )`;
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
