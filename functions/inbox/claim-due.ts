/**
 * Claim due rows of one consumer for one worker invocation (seed 000's claim, with a lease,
 * per-aggregate serialization and runs).
 *
 * Why it looks the way it does:
 *
 * - Lanes, not rows. integration.consumer_lane holds one row per (consumer, aggregate)
 *   with queued work (migration 0050). A claim takes the oldest due lanes with FOR UPDATE
 *   SKIP LOCKED, reads each lane's first rows in head order, and takes the run of due rows
 *   at its start. Every step is an ordered range of a partial index whose ORDER BY is the
 *   index key, or a primary-key probe: the plan has no join or filter whose cost depends on
 *   the planner guessing how much of the table is due. The backlog can grow from nothing
 *   to millions after the last ANALYZE (an outage, a paused schedule, a TRIM_HORIZON
 *   deploy) and a claim still reads about runLimit + 1 index entries per lane it takes
 *   (test/db/worker/claim-plan.test.ts holds it to a budget of buffers per claimed row).
 *
 * - Per-aggregate serialization (DESIGN.md §6.4) is the lane's row lock and owner. A lane
 *   is claimable only with locked_by null; the claim sets locked_by in the same statement
 *   that moves its rows to PROCESSING, and the statement is its own transaction, so the
 *   lock it takes is held only while it runs, never across a round trip. A concurrent
 *   claim skips a lane being claimed (SKIP LOCKED) or, once that commits, finds locked_by
 *   set when it re-reads the row it locks (READ COMMITTED re-checks the WHERE on the
 *   latest version). Nothing is shared by all claimers of a consumer: they scale.
 *
 * - Head of line per aggregate. A lane's rows are read from its head: the first row that
 *   is not finished, by aggregate_version nulls last, then arrival, then Kafka offset
 *   (the rows of one ingest batch share received_at; an aggregate lives in one partition,
 *   so offsets are its order). The run is the longest prefix of due rows, at most runLimit:
 *   a later version never overtakes an earlier one that is backing off. A lane whose head
 *   is not due is not claimed; its due_at is set to when the head will be.
 *
 * - Runs. One lane gives up to runLimit consecutive rows, processed in order in one batch
 *   (process-batch.ts); a hot aggregate no longer costs a claim per row.
 *
 * - consumer_inbox's lane triggers mark a lane whenever a statement queues rows of its
 *   aggregate, whoever the writer. Rows in flight without a lane (a worker of the release
 *   before lanes, another writer) are PROCESSING rows in the lane's window: such a lane is
 *   not claimed until their lease could have expired.
 *
 * The lease ends no later than the invocation's own deadline (the caller passes the seconds
 * left), so a lease never outlives the worker that holds it.
 */
import { DEFAULTS } from '../lib/config';
import type { Queryable } from '../lib/db';
import { planOpaque } from './plan-opaque';
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
  /**
   * When the row after the run is due, in seconds from the claim (0 or less: due now);
   * null when the claim saw no row after the run. What the lane's due time becomes if the
   * whole run succeeds.
   */
  nextDueInSeconds: number | null;
}

export interface Claim {
  /** Every claimed row, lane by lane, each lane's rows in run order. */
  rows: ClaimedRow[];
  lanes: ClaimedLane[];
  /** Lanes looked at but not claimed because their head is not due (their due time was corrected). */
  deferredLanes: number;
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

type ClaimRecord = ClaimedRow & { lane_no: number; next_due_in_seconds: number | null };

/** One statement, its own transaction: nothing it locks is held across a round trip. */
export async function claimDue(q: Queryable, options: ClaimOptions): Promise<Claim> {
  return toClaim(await claimStatement(q, options));
}

/** The claim's statement, not yet sent (tests EXPLAIN it). */
export function claimStatement(q: Queryable, options: ClaimOptions) {
  const { consumerName, owner, limit } = options;
  const runLimit = Math.max(1, Math.min(options.runLimit ?? DEFAULTS.workerRunLength, limit));
  const leaseSeconds = Math.max(options.leaseSeconds, 0.001);
  return q<(ClaimRecord & { deferred_lanes: number })[]>`
    with locked_lanes as materialized (
      select l.ctid as lane_ctid, l.aggregate_type, l.aggregate_id, l.due_at
      from integration.consumer_lane l
      where l.consumer_name = ${consumerName}
        and l.locked_by is null
        and l.held_by is null
        and l.due_at <= now()
      order by l.due_at
      limit ${limit}
      for update of l skip locked
    ),
    -- FOR UPDATE locks a lane's latest version, which may be newer than this statement's
    -- snapshot (a writer queued rows in it since): such a lane is left as it is this time,
    -- never judged empty or not due from reads that cannot see those rows. A version the
    -- snapshot sees is found again by its ctid; a newer one is not.
    lanes as materialized (
      select g.lane_ctid, g.aggregate_type, g.aggregate_id,
             row_number() over (order by g.due_at, g.aggregate_type, g.aggregate_id) as lane_no
      from locked_lanes g
      where exists (select 1 from integration.consumer_lane s where s.ctid = g.lane_ctid)
    ),
    -- Each lane's first unfinished rows in head order: one more than a run, to see what
    -- follows it. The condition and the ORDER BY are consumer_inbox_open_lane_idx's key
    -- (migration 0050 says why the lane is one array value).
    window_rows as materialized (
      select g.lane_no, r.inbox_id, r.status,
             row_number() over (partition by g.lane_no order by r.aggregate_version, r.received_at, r.offset_no) as pos,
             r.status = 'RECEIVED' or (r.status = 'RETRY_PENDING' and r.next_attempt_at <= now()) as due,
             case r.status when 'RECEIVED' then now() when 'RETRY_PENDING' then r.next_attempt_at else r.lease_expires_at end as due_at
      from lanes g
      cross join lateral (
        select d.inbox_id, d.status, d.next_attempt_at, d.lease_expires_at, d.aggregate_version, d.received_at, d.offset_no
        from integration.consumer_inbox d
        where array[d.consumer_name, d.aggregate_type, d.aggregate_id] = array[${consumerName}::text, g.aggregate_type, g.aggregate_id]
          and d.status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING')
        order by d.aggregate_version, d.received_at, d.offset_no
        limit ${runLimit + 1}
      ) r
    ),
    lane_view as materialized (
      select w.lane_no,
             bool_or(w.status = 'PROCESSING') as in_flight,
             min(w.due_at) filter (where w.status = 'PROCESSING') as in_flight_until,
             -- the run: due rows from the head on, up to the first that is not due
             coalesce(min(w.pos) filter (where not w.due), count(*) + 1) - 1 as clear_rows,
             min(w.due_at) filter (where w.pos = 1) as head_due_at
      from window_rows w
      group by w.lane_no
    ),
    run as materialized (
      select w.inbox_id, w.lane_no, w.pos
      from window_rows w
      join lane_view v on v.lane_no = w.lane_no
      where not v.in_flight and w.pos <= least(v.clear_rows, ${runLimit})
    ),
    taken as materialized (
      select r.inbox_id, r.lane_no, r.pos
      from (select r.*, row_number() over (order by r.lane_no, r.pos) as n from run r) r
      where r.n <= ${limit}
    ),
    claimed as (
      update integration.consumer_inbox i
      set status = 'PROCESSING',
          attempt_count = i.attempt_count + 1,
          locked_by = ${owner},
          locked_at = now(),
          lease_expires_at = now() + make_interval(secs => ${leaseSeconds}),
          updated_at = now()
      where i.inbox_id = any(array(select inbox_id from taken))
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
    -- Lanes that gave rows now belong to this worker. due_at is cleared: what ingest
    -- marks while the lane is held tells the release that something arrived.
    locked as (
      update integration.consumer_lane l
      set locked_by = ${owner}, locked_at = now(), due_at = null, updated_at = now()
      where l.ctid = any(array(
          select g.lane_ctid from lanes g
          where g.lane_no in (select t.lane_no from taken t join claimed c on c.inbox_id = t.inbox_id)))
    ),
    -- Lanes not claimed because their head is not due, or it is in flight without a lane:
    -- look again when that changes.
    corrected as (
      update integration.consumer_lane l
      set due_at = case when v.in_flight then greatest(v.in_flight_until, now() + interval '1 second') else v.head_due_at end,
          updated_at = now()
      from lanes g join lane_view v on v.lane_no = g.lane_no
      where l.ctid = g.lane_ctid
        and (v.in_flight or v.clear_rows = 0)
      returning 1
    ),
    -- Lanes with nothing left to do.
    emptied as (
      delete from integration.consumer_lane l
      where l.ctid = any(array(
          select g.lane_ctid from lanes g where not exists (select 1 from lane_view v where v.lane_no = g.lane_no)))
    )
    select c.*, t.lane_no,
           (select count(*)::int from corrected) as deferred_lanes,
           (select extract(epoch from nx.due_at - now())::float8
            from window_rows nx
            where nx.lane_no = t.lane_no
              and nx.pos = (select max(t2.pos) from taken t2 where t2.lane_no = t.lane_no) + 1) as next_due_in_seconds
    from claimed c
    join taken t on t.inbox_id = c.inbox_id
    order by t.lane_no, t.pos`;
}

function toClaim(records: readonly (ClaimRecord & { deferred_lanes: number })[]): Claim {
  const lanes: ClaimedLane[] = [];
  const rows: ClaimedRow[] = [];
  let current: ClaimedLane | undefined;
  let currentNo = -1;
  for (const record of records) {
    const { lane_no: laneNo, next_due_in_seconds: nextDue, deferred_lanes: _deferred, ...row } = record;
    if (laneNo !== currentNo) {
      current = { aggregateType: row.aggregate_type, aggregateId: row.aggregate_id, rows: [], nextDueInSeconds: nextDue };
      lanes.push(current);
      currentNo = laneNo;
    }
    current!.rows.push(row);
    rows.push(row);
  }
  return { rows, lanes, deferredLanes: records[0]?.deferred_lanes ?? 0 };
}
