/**
 * Claim unpublished outbox rows for one relay invocation, per aggregate and in order.
 *
 * The shape is the worker's claim (functions/inbox/claim-due.ts), for the same reasons:
 *
 * - Lanes, not rows. integration.outbox_lane holds one row per consumer and aggregate with
 *   unpublished events (migrations 0081, 0160). A claim takes due lanes with FOR UPDATE
 *   SKIP LOCKED, reads each lane's first unpublished rows in outbox_seq order, and takes
 *   the run of due rows at its start. A lane held by a relay is not claimable until its lease expires, so an
 *   aggregate's events are published by one relay at a time, in order: two relays never
 *   interleave (or reorder) one aggregate's events. A lane whose lease expired (its relay
 *   crashed or was killed) is taken over by the next claim; no reaper is needed.
 *
 * - One consumer's. A relay serves one emitting consumer (`consumerName`) and claims only its
 *   lanes, as its role's row-level security policy also holds it to (migration 0160); the
 *   consumer is compared as an InitPlan, like the policy's (functions/lib/own-consumer.ts).
 *   Without `consumerName` (the owner, in tests) the claim takes every consumer's lanes.
 *
 * - Locked by the row version the statement's snapshot saw: a lane an emitter marked since
 *   (its trigger rewrote the lane) fails the ctid re-check and is skipped, never judged
 *   empty on the strength of a snapshot that cannot see the new rows.
 *
 * - Head of line. Only the head (first unpublished row) of a lane can be backing off, after
 *   the broker refused it; a lane whose head is not due is not claimed and its due_at is
 *   set to the head's next attempt. Rows behind a refused head wait behind it.
 *
 * - One statement, its own transaction: the locks it takes are held only while it runs.
 *   What a claim owns afterwards is recorded in the rows (claimed_by) and the lane
 *   (locked_by, lease_expires_at), and every later change is fenced on that owner.
 */
import type { Queryable } from '../lib/db';
import { ownConsumer } from '../lib/own-consumer';
import { planOpaque } from '../lib/plan-opaque';
import type { OutboxRow } from './types';

export interface ClaimedOutboxLane {
  consumerName: string;
  aggregateType: string;
  aggregateId: string;
  /** The run, in publishing order. */
  rows: OutboxRow[];
  /** The claim saw an unpublished row after the run (the lane has more to publish). */
  more: boolean;
}

export interface OutboxClaim {
  rows: OutboxRow[];
  lanes: ClaimedOutboxLane[];
  /** Lanes looked at but not claimed because their head is backing off (their due time was corrected). */
  deferredLanes: number;
}

export interface OutboxClaimOptions {
  owner: string;
  /** The emitting consumer whose lanes the claim takes; every consumer's when omitted (the owner's connection only). */
  consumerName?: string;
  /** Rows per claim. */
  limit: number;
  /** Rows of one aggregate per claim; never more than limit. */
  runLength: number;
  /** The lanes' lease; the caller caps it at the invocation's remaining time. */
  leaseSeconds: number;
}

type ClaimRecord = OutboxRow & { lane_no: number; pos: number; more: boolean; deferred_lanes: number };

export async function claimOutbox(q: Queryable, options: OutboxClaimOptions): Promise<OutboxClaim> {
  return toClaim(await claimOutboxStatement(q, options));
}

/**
 * The claim's statement, not yet sent (tests EXPLAIN it), composed of the named steps
 * below: the due lanes locked, their first unpublished rows, the runs taken, then the rows
 * and lanes written.
 */
export function claimOutboxStatement(q: Queryable, options: OutboxClaimOptions) {
  const { owner, limit } = options;
  const runLength = Math.max(1, Math.min(options.runLength, limit));
  const leaseSeconds = Math.max(options.leaseSeconds, 0.001);
  return q<ClaimRecord[]>`
    with ${lockedLanes(q, limit, options.consumerName)},
    ${windowRows(q, runLength)},
    ${laneView(q)},
    ${taken(q, limit, runLength)},
    ${claimedRows(q, owner)},
    ${lockedRuns(q, owner, leaseSeconds)},
    ${corrected(q)},
    ${emptied(q, options.consumerName)}
    -- One row even when nothing was claimed, to carry the corrected lanes' count; joined
    -- with emptied so that it runs (a function call, not a data-modifying WITH).
    select c.*, d.deferred_lanes
    from (select count(*)::int as deferred_lanes from corrected) d
    cross join emptied e
    left join claimed c on true
    order by c.lane_no, c.pos`;
}

/**
 * The due lanes, locked, skipping those another relay holds, numbered in claim order: free
 * lanes that are due, and lanes whose relay's lease ran out. Each set is an ordered range of
 * its own (limit each), found again by ctid for the lock.
 */
function lockedLanes(q: Queryable, limit: number, consumerName: string | undefined) {
  return q`lanes as materialized (
      select l.ctid as lane_ctid, l.consumer_name, l.aggregate_type, l.aggregate_id,
             row_number() over (order by coalesce(l.due_at, l.lease_expires_at), l.consumer_name, l.aggregate_type, l.aggregate_id) as lane_no
      from (
        select l.ctid, l.consumer_name, l.aggregate_type, l.aggregate_id, l.due_at, l.lease_expires_at
        from integration.outbox_lane l
        where l.ctid = any(array(
            (select c.ctid from integration.outbox_lane c
             where ${ofConsumer(q, consumerName)} and c.locked_by is null and c.due_at <= now()
             order by c.due_at
             limit ${limit})
            union all
            -- Held by a relay whose lease ran out: it is gone (leases end with invocations).
            (select c.ctid from integration.outbox_lane c
             where ${ofConsumer(q, consumerName)} and c.locked_by is not null and c.lease_expires_at <= now()
             order by c.lease_expires_at
             limit ${limit})))
        for update of l skip locked
      ) l
    )`;
}

/** The lane `c` is the claiming consumer's (any lane without one). */
function ofConsumer(q: Queryable, consumerName: string | undefined) {
  return consumerName === undefined ? q`true` : q`c.consumer_name = ${ownConsumer(q, consumerName)}`;
}

/**
 * Each lane's first unpublished rows: one more than a run, to see whether more follow. Found
 * by the lane's aggregate (outbox_unpublished_lane_idx), its consumer checked on them: the
 * check is opaque (plan-opaque.ts), since written plainly it lets the planner read the
 * consumer's whole backlog per lane from outbox_unpublished_age_idx instead.
 */
function windowRows(q: Queryable, runLength: number) {
  return q`window_rows as materialized (
      select g.lane_no, o.outbox_seq,
             row_number() over (partition by g.lane_no order by o.outbox_seq) as pos,
             o.next_attempt_at is null or o.next_attempt_at <= now() as due,
             coalesce(o.next_attempt_at, now()) as due_at
      from lanes g
      cross join lateral (
        select o.outbox_seq, o.next_attempt_at
        from integration.outbox o
        where o.aggregate_type = g.aggregate_type
          and o.aggregate_id = g.aggregate_id
          and o.published_at is null
          and ${planOpaque(q, q`o.consumer_name = g.consumer_name`)}
        order by o.outbox_seq
        limit ${runLength + 1}
      ) o
    )`;
}

/** What each lane's window says: its run of due rows from the head, when its head is due, how many rows it saw. */
function laneView(q: Queryable) {
  return q`lane_view as materialized (
      select w.lane_no,
             coalesce(min(w.pos) filter (where not w.due), count(*) + 1) - 1 as clear_rows,
             min(w.due_at) filter (where w.pos = 1) as head_due_at,
             count(*) as seen_rows
      from window_rows w
      group by w.lane_no
    )`;
}

/**
 * The runs, cut at the claim's limit; a lane has more to publish when its window saw a
 * row after the last one taken (positions are 1, 2, … seen_rows).
 */
function taken(q: Queryable, limit: number, runLength: number) {
  return q`taken as materialized (
      select r.outbox_seq, r.lane_no, r.pos,
             r.seen_rows > max(r.pos) over (partition by r.lane_no) as more
      from (
        select w.outbox_seq, w.lane_no, w.pos, v.seen_rows, row_number() over (order by w.lane_no, w.pos) as n
        from window_rows w
        join lane_view v on v.lane_no = w.lane_no
        where w.pos <= least(v.clear_rows, ${runLength})
      ) r
      where r.n <= ${limit}
    )`;
}

/**
 * Each taken row by its primary key, its lane and place carried along: a join of the
 * returned rows to taken afterwards would compare every pair (planned on a CTE's
 * estimate of a few rows, it runs as a nested loop: quadratic in the batch). The state
 * check is opaque (plan-opaque.ts), so that the only index the join can use is the key:
 * written plainly, it lets the planner read every unpublished row for each taken one.
 */
function claimedRows(q: Queryable, owner: string) {
  return q`claimed as (
      update integration.outbox o
      set claimed_by = ${owner}, claimed_at = now()
      from taken t
      where o.outbox_seq = t.outbox_seq
        and ${planOpaque(q, q`o.published_at is null`)}
      returning o.outbox_seq, o.event_id::text, o.consumer_name, o.source_event_id, o.ordinal, o.topic_name,
                o.event_type, o.event_version, o.aggregate_type, o.aggregate_id, o.producer, o.correlation_id,
                o.occurred_at, o.payload, o.trace_context, o.attempt_count, t.lane_no, t.pos, t.more
    )`;
}

/** The lanes a run was taken from, held under `owner`'s lease: no other relay claims them until it ends. */
function lockedRuns(q: Queryable, owner: string, leaseSeconds: number) {
  return q`locked as (
      update integration.outbox_lane l
      set locked_by = ${owner}, locked_at = now(), lease_expires_at = now() + make_interval(secs => ${leaseSeconds}),
          due_at = null, updated_at = now()
      where l.ctid = any(array(select g.lane_ctid from lanes g where g.lane_no in (select t.lane_no from taken t)))
    )`;
}

/**
 * Head backing off: not claimed; look again when it is due (a lane taken over from a
 * dead relay is let go too).
 */
function corrected(q: Queryable) {
  return q`corrected as (
      update integration.outbox_lane l
      set due_at = v.head_due_at, locked_by = null, locked_at = null, lease_expires_at = null, updated_at = now()
      from lanes g join lane_view v on v.lane_no = g.lane_no
      where l.ctid = g.lane_ctid and v.clear_rows = 0
      returning 1
    )`;
}

/**
 * Lanes with nothing unpublished left: deleted, through integration.delete_claimed_outbox_lanes
 * (migration 0200): a relay's role holds no table-level DELETE, which would let it lock the table.
 */
function emptied(q: Queryable, consumerName: string | undefined) {
  return q`emptied as materialized (
      select integration.delete_claimed_outbox_lanes(${consumerName ?? null}::text, array(
          select g.lane_ctid from lanes g where not exists (select 1 from lane_view v where v.lane_no = g.lane_no))) as n
    )`;
}

function toClaim(records: readonly ClaimRecord[]): OutboxClaim {
  const lanes: ClaimedOutboxLane[] = [];
  const rows: OutboxRow[] = [];
  let currentNo = -1;
  for (const { lane_no: laneNo, pos: _pos, more, deferred_lanes: _deferred, ...row } of records) {
    if (row.outbox_seq === null) continue; // the count-only row of an empty claim
    if (laneNo !== currentNo) {
      lanes.push({ consumerName: row.consumer_name, aggregateType: row.aggregate_type, aggregateId: row.aggregate_id, rows: [], more });
      currentNo = laneNo;
    }
    lanes[lanes.length - 1]!.rows.push(row);
    rows.push(row);
  }
  const deferredLanes = records[0]?.deferred_lanes ?? 0;
  return { rows, lanes, deferredLanes };
}
