-- The worker's claim reads lanes, one row per (consumer, aggregate) with work queued,
-- instead of walking due inbox rows (functions/inbox/claim-due.ts, docs/worker.md).
--
-- Why: the claim that walked consumer_inbox's due rows depended on the planner guessing
-- the due fraction right. Statistics are taken while a healthy inbox has almost nothing
-- due; when a backlog arrives the planner kept believing "nothing is due" and its
-- per-aggregate lookups filtered the whole backlog for every row claimed. A lane row per
-- aggregate makes every step of the claim a short ordered range of a partial index or a
-- primary-key probe, whatever the statistics say, and its row lock is what serializes the
-- claims of one aggregate, so no lock shared by all claimers of a consumer remains.
--
-- consumer_inbox stays the source of truth. A lane is an index of work: it says when its
-- aggregate may have a due head, and who holds the aggregate while its rows are in
-- flight. The triggers below keep lanes marked for every row queued, by any writer.

create table integration.consumer_lane (
    consumer_name   text not null,
    aggregate_type  text not null,
    aggregate_id    text not null,
    -- When the lane is worth a look: its head (first RECEIVED/RETRY_PENDING row in head
    -- order) is due then, or something arrived. Null: nothing queued (idle), or claimed
    -- with nothing arrived since.
    due_at          timestamptz null,
    -- The worker holding the aggregate: its rows are PROCESSING under the same owner.
    locked_by       text null,
    locked_at       timestamptz null,
    updated_at      timestamptz not null default now(),

    constraint consumer_lane_pk primary key (consumer_name, aggregate_type, aggregate_id),
    constraint consumer_lane_lock_ck check ((locked_by is null) = (locked_at is null))
);

-- Lanes a claim may take, oldest first. Claimed lanes leave it (locked_by), idle ones too
-- (due_at null), so its size follows the queued aggregates, not the history.
create index consumer_lane_due_idx
on integration.consumer_lane (consumer_name, due_at)
where due_at is not null and locked_by is null;

-- Lanes locked by a worker, oldest first: the reaper frees a lane locked longer than any
-- invocation can last whose owner has no row in flight in it (a writer that moved the rows
-- without its release), so an aggregate can never stay locked.
create index consumer_lane_locked_idx
on integration.consumer_lane (consumer_name, locked_at)
where locked_by is not null;

-- An aggregate's rows that are not finished, in head order: aggregate_version (nulls
-- last), arrival, then Kafka offset (the rows of one ingest batch share their received_at).
-- The claim reads a lane's run from its start; PROCESSING rows are in it so that an
-- aggregate in flight without a lane is still seen as in flight.
--
-- Keyed by the lane as one value, array[consumer_name, aggregate_type, aggregate_id], and
-- every lookup says exactly that: no other index can serve such a condition, and the only
-- alternative, reading the table, costs what the planner can see (its size in pages). With
-- plain columns, statistics taken before a backlog arrived ("an aggregate has one row,
-- nothing is due") made the planner prefer seed 000's consumer_inbox_aggregate_idx, or
-- consumer_inbox_retry_idx, plus a sort "of one row": it read every row of a hot
-- aggregate's history, or every due row, per lane.
create index consumer_inbox_open_lane_idx
on integration.consumer_inbox ((array[consumer_name, aggregate_type, aggregate_id]), aggregate_version, received_at, offset_no)
where status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING');

-- Replaced by the lanes and the index above: every entry they wrote was written again on
-- every claim and retry (none of consumer_inbox's updates is HOT).
drop index integration.consumer_inbox_due_arrival_idx;
drop index integration.consumer_inbox_due_aggregate_idx;
drop index integration.consumer_inbox_in_flight_aggregate_idx;
drop table integration.consumer_claim_lock;

-- Every statement that queues rows (inserts them RECEIVED or RETRY_PENDING, or updates
-- them into those states, or moves their next attempt) marks their lanes, at the end of
-- the statement, whoever the writer: the lane is created, or its due_at becomes the
-- earliest of its own and the rows'. A lane is written even when that changes nothing:
-- the claim locks a lane by the row version its snapshot saw, so a lane written since is
-- skipped rather than judged (empty, or its head not due) by a snapshot that cannot see
-- the new rows; a lane locked by a worker gets due_at set, which its release reads as
-- "something may be due by then". Lanes in "C" order, the order every statement that
-- locks several lanes uses, so two of them never deadlock.
--
-- The lanes are the inbox's own bookkeeping: the trigger functions run as their owner
-- (SECURITY DEFINER, with a search path of the system catalog only), so a role that may
-- write inbox rows needs no privilege on the lanes to keep them right.
create function integration.consumer_inbox_mark_lanes() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into integration.consumer_lane as l (consumer_name, aggregate_type, aggregate_id, due_at)
    select q.consumer_name, q.aggregate_type, q.aggregate_id, min(coalesce(q.next_attempt_at, now()))
    from queued q
    where q.status in ('RECEIVED', 'RETRY_PENDING')
    group by q.consumer_name, q.aggregate_type, q.aggregate_id
    order by q.consumer_name collate "C", q.aggregate_type collate "C", q.aggregate_id collate "C"
    on conflict (consumer_name, aggregate_type, aggregate_id)
    do update set due_at = least(l.due_at, excluded.due_at), updated_at = now();
    return null;
end
$$;

create trigger consumer_inbox_mark_lanes_on_insert
after insert on integration.consumer_inbox
referencing new table as queued
for each statement execute function integration.consumer_inbox_mark_lanes();

create trigger consumer_inbox_mark_lanes_on_update
after update on integration.consumer_inbox
referencing new table as queued
for each statement execute function integration.consumer_inbox_mark_lanes();

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

-- Lanes churn like the queue (inserted, claimed, released, deleted): vacuum them early.
alter table integration.consumer_lane set (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 500,
    autovacuum_analyze_scale_factor = 0.01,
    autovacuum_analyze_threshold = 500
);

-- What each role may do with the lanes (0046's matrix, test/db/security/privileges.ts).
-- Ingest and ops write lanes only through consumer_inbox's triggers, which run as the owner.
-- worker (claim-due.ts; release-lanes.ts releaseLanes): takes lanes, hands them back,
-- deletes the ones it emptied.
grant select, delete on integration.consumer_lane to inbox_worker;
grant update (due_at, locked_by, locked_at, updated_at) on integration.consumer_lane to inbox_worker;
-- reaper (release-expired.ts, release-lanes.ts freeAbandonedLanes, adopt-orphans.ts): hands
-- back the lanes of expired leases, frees abandoned ones, gives orphaned rows a lane.
grant select, insert on integration.consumer_lane to inbox_reaper;
grant update (due_at, locked_by, locked_at, updated_at) on integration.consumer_lane to inbox_reaper;
