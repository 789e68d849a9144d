-- The worker's claim reads lanes, one row per (consumer, aggregate) with queued work,
-- instead of walking due inbox rows (functions/inbox/claim-due.ts, docs/worker.md).
--
-- Why: the claim that walked consumer_inbox's due rows depended on the planner guessing
-- the due fraction right. Statistics are taken while a healthy inbox has almost nothing
-- due; when a backlog arrives the planner kept believing "nothing is due" and its
-- per-aggregate lookups filtered the whole backlog for every row claimed. With a lane per
-- aggregate every step of the claim is a short ordered range of an index, or a probe of
-- one key, whatever the statistics say; and no lock shared by all the claimers of a
-- consumer is needed any more.
--
-- consumer_inbox stays the source of truth: a lane only says when its aggregate is worth
-- a look. Who may process an aggregate is read from its rows (one in flight, PROCESSING,
-- holds it), under the lane's row lock while a claim runs. The triggers below mark a lane
-- for every row queued, whoever the writer.

create table integration.consumer_lane (
    consumer_name   text not null,
    aggregate_type  text not null,
    aggregate_id    text not null,
    -- When the lane is worth a look: its head (first RECEIVED/RETRY_PENDING row in head
    -- order) is due then, or something was queued or finished. Null: nothing to do until
    -- then (its rows wait behind rows in flight, or nothing is queued).
    due_at          timestamptz null,
    -- Quarantine policy hold-aggregate (functions/framework/types.ts): the QUARANTINED row
    -- that holds the aggregate. A held lane is never claimed; its hold ends when that row
    -- leaves QUARANTINED (an operator's replay or resolve).
    held_by         uuid null,
    updated_at      timestamptz not null default now(),

    constraint consumer_lane_pk primary key (consumer_name, aggregate_type, aggregate_id)
);

-- Lanes a claim may take, oldest first. Its size follows the aggregates with work to look
-- at, not the inbox's history.
create index consumer_lane_due_idx
on integration.consumer_lane (consumer_name, due_at)
where due_at is not null and held_by is null;

-- Held lanes: the gauges count them, a hold ends through it.
create index consumer_lane_held_by_idx
on integration.consumer_lane (held_by)
where held_by is not null;

-- An aggregate's open rows (queued and in flight) in head order: aggregate_version (nulls
-- last), arrival, then Kafka offset (the rows of one ingest batch share their received_at).
-- Keyed by the lane as one value, array[consumer_name, aggregate_type, aggregate_id], and
-- every lookup says exactly that, with the same statuses: no other index can serve such a
-- condition, and the only alternative, reading the table, costs what the planner can see
-- (its size in pages). With plain columns, or with the statuses of the case inbox design's
-- consumer_inbox_retry_idx (RECEIVED, RETRY_PENDING), statistics taken before a backlog
-- arrived ("an aggregate has one row, nothing is due") made the planner prefer
-- consumer_inbox_aggregate_idx or consumer_inbox_retry_idx plus a sort "of one row": it
-- read every row of a hot aggregate's history, or every due row, per lane.
create index consumer_inbox_open_lane_idx
on integration.consumer_inbox ((array[consumer_name, aggregate_type, aggregate_id]), aggregate_version, received_at, offset_no)
where status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING');

-- Rows in flight, by lane (the claim: is the aggregate in flight?) and by lease (the
-- reaper: which leases have expired?). The only index on PROCESSING rows: with a second
-- one, the planner could read it whole for either question.
create index consumer_inbox_in_flight_lane_idx
on integration.consumer_inbox ((array[consumer_name, aggregate_type, aggregate_id]), lease_expires_at)
where status = 'PROCESSING';

-- Replaced by the lanes and the indexes above (consumer_inbox_lease_idx, 0030, by the
-- in-flight index: one entry less written per claim).
drop index integration.consumer_inbox_lease_idx;
drop index integration.consumer_inbox_due_arrival_idx;
drop index integration.consumer_inbox_due_aggregate_idx;
drop index integration.consumer_inbox_in_flight_aggregate_idx;
drop table integration.consumer_claim_lock;

-- Lanes waiting for rows in flight (due_at null, not held): the reaper looks at them once a
-- minute, in case the writer that finished those rows did not mark the lane (the worker
-- does, functions/inbox/lanes.ts).
create index consumer_lane_waiting_idx
on integration.consumer_lane (consumer_name)
where due_at is null and held_by is null;

-- Every row queued, by any writer, marks its lane, in the writer's transaction: inserted or
-- updated RECEIVED/RETRY_PENDING (or its next attempt moved), its lane is created, or due
-- at the earliest of its own and the row's due time. A row that leaves QUARANTINED ends
-- the hold it was the reason for, and its lane is due now. (A row that leaves PROCESSING
-- for good is the writer's to mark: the worker and the reaper do, functions/inbox/lanes.ts.)
--
-- A lane is written even when that changes nothing: the claim takes a lane only at the row
-- version its snapshot saw, so a lane written since is left alone rather than judged
-- (empty, in flight, not due) from reads that cannot see the change.
--
-- Inserts come in batches (ingest: 500 records a statement): one statement-level trigger,
-- lanes in "C" order, the order every statement that locks several lanes uses, so two of
-- them never deadlock. Updates are row triggers whose WHEN decides in the executor, without
-- a call, that a claim or a completion (most updates) has nothing to mark.
--
-- The lanes are the inbox's own bookkeeping: the trigger functions run as their owner
-- (SECURITY DEFINER, with a search path of the system catalog only), so a role that may
-- write inbox rows needs no privilege on the lanes to keep them right.
create function integration.consumer_inbox_lanes_of_inserted_rows() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into integration.consumer_lane as l (consumer_name, aggregate_type, aggregate_id, due_at)
    select n.consumer_name, n.aggregate_type, n.aggregate_id, min(coalesce(n.next_attempt_at, now()))
    from inserted_rows n
    where n.status in ('RECEIVED', 'RETRY_PENDING')
    group by n.consumer_name, n.aggregate_type, n.aggregate_id
    order by n.consumer_name collate "C", n.aggregate_type collate "C", n.aggregate_id collate "C"
    on conflict (consumer_name, aggregate_type, aggregate_id)
    do update set due_at = least(l.due_at, excluded.due_at), updated_at = now();
    return null;
end
$$;

create function integration.consumer_inbox_lane_of_queued_row() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into integration.consumer_lane as l (consumer_name, aggregate_type, aggregate_id, due_at)
    values (new.consumer_name, new.aggregate_type, new.aggregate_id, coalesce(new.next_attempt_at, now()))
    on conflict (consumer_name, aggregate_type, aggregate_id)
    do update set due_at = least(l.due_at, excluded.due_at), updated_at = now();
    return null;
end
$$;

create function integration.consumer_inbox_lane_hold_ends() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    update integration.consumer_lane
    set held_by = null, due_at = now(), updated_at = now()
    where held_by = new.inbox_id;
    return null;
end
$$;

create trigger consumer_inbox_lanes_of_inserted_rows
after insert on integration.consumer_inbox
referencing new table as inserted_rows
for each statement execute function integration.consumer_inbox_lanes_of_inserted_rows();

create trigger consumer_inbox_lane_of_queued_row
after update of status, next_attempt_at on integration.consumer_inbox
for each row
when (new.status in ('RECEIVED', 'RETRY_PENDING')
      and (old.status is distinct from new.status or old.next_attempt_at is distinct from new.next_attempt_at))
execute function integration.consumer_inbox_lane_of_queued_row();

create trigger consumer_inbox_lane_hold_ends
after update of status on integration.consumer_inbox
for each row
when (old.status = 'QUARANTINED' and new.status <> 'QUARANTINED')
execute function integration.consumer_inbox_lane_hold_ends();

-- Lanes index the inbox's rows: emptying the inbox empties them too.
create function integration.consumer_inbox_truncate_lanes() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    truncate integration.consumer_lane;
    return null;
end
$$;

create trigger consumer_inbox_truncate_lanes
after truncate on integration.consumer_inbox
for each statement execute function integration.consumer_inbox_truncate_lanes();

-- Every aggregate with queued or in-flight rows gets a lane, due now: the claim finds its
-- head (and sees rows in flight under a worker of the previous release as in flight).
insert into integration.consumer_lane (consumer_name, aggregate_type, aggregate_id, due_at)
select distinct consumer_name, aggregate_type, aggregate_id, now()
from integration.consumer_inbox
where status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING');

-- Lanes churn like the queue (created, looked at, deleted): vacuum them early.
alter table integration.consumer_lane set (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 500,
    autovacuum_analyze_scale_factor = 0.01,
    autovacuum_analyze_threshold = 500
);

-- What each role may do with the lanes (0046's matrix, test/db/security/privileges.ts).
-- Ingest and ops write lanes only through consumer_inbox's triggers, which run as the owner.
-- worker (claim-due.ts; lanes.ts): takes lanes, sets them due or deletes them, wakes the
--   lanes of its batch, holds a lane when a run stops at a quarantine under hold-aggregate.
grant select, insert, delete on integration.consumer_lane to inbox_worker;
grant update (due_at, held_by, updated_at) on integration.consumer_lane to inbox_worker;
-- reaper (lanes.ts, adopt-orphans.ts, release-expired.ts): wakes and holds the lanes of
--   expired leases, ends stale holds, wakes stranded lanes, gives orphaned rows a lane.
grant select, insert on integration.consumer_lane to inbox_reaper;
grant update (due_at, held_by, updated_at) on integration.consumer_lane to inbox_reaper;
-- ops (stats.ts heldAggregates): lists what is held.
grant select on integration.consumer_lane to inbox_ops;
