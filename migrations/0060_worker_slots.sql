-- Who is awake for a consumer (functions/wings/wake-ups/invocation.ts, docs/worker.md "Wake-ups"):
-- a fixed number of slots per consumer, its workers' maximum concurrency. A worker
-- invocation drains only while it holds a slot; an invocation sent to wake a worker (by
-- ingest, by a worker fanning out or handing over) reserves a slot first, so the number of
-- workers awake or on their way never exceeds the slots, however many ingest batches and
-- workers decide at once. Each hold lapses unless renewed: a worker that died, or an
-- invocation that never started, frees its slot by itself.
--
-- The ingest's wake-up gate reads the same rows: no slot held means nobody is awake to see
-- the rows it just stored, so it reserves slot 1 and invokes the worker; any slot held
-- means a worker is draining or starting, and the batch sends nothing.

create table integration.consumer_worker_slot (
    consumer_name  text not null,
    slot_no        integer not null,
    -- The worker invocation holding the slot (its lease owner id), or the invitation an
    -- invoked worker will present to take it ('wake-up:…', 'fan-out:…', 'hand-over:…');
    -- null when free.
    held_by        text null,
    -- The hold lapses then unless renewed; a lapsed slot is free whatever held_by says.
    held_until     timestamptz null,
    updated_at     timestamptz not null default now(),

    constraint consumer_worker_slot_pk primary key (consumer_name, slot_no),
    constraint consumer_worker_slot_no_ck check (slot_no >= 1),
    constraint consumer_worker_slot_hold_ck check ((held_by is null) = (held_until is null))
);

-- A handful of rows, each rewritten every few seconds while its worker is awake, on no
-- indexed column: room on the page keeps those updates HOT, and vacuum comes early.
alter table integration.consumer_worker_slot set (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 200,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 200
);

-- What each role may do with the slots (test/db/security/privileges.ts).
-- ingest (wake-up-gate.ts): sees whether any slot is held; reserves slot 1 for the worker
-- it invokes, creating the row when no worker has run yet. SELECT on the columns its
-- statement reads: the ON CONFLICT target, the hold, the RETURNING.
grant select (consumer_name, slot_no, held_until) on integration.consumer_worker_slot to inbox_ingest;
grant insert (consumer_name, slot_no, held_by, held_until, updated_at) on integration.consumer_worker_slot to inbox_ingest;
grant update (held_by, held_until, updated_at) on integration.consumer_worker_slot to inbox_ingest;
-- worker (worker-slot.ts): creates its consumer's slots, takes, renews, leaves and hands
-- over its own, reserves free ones for the workers it fans out to.
grant select on integration.consumer_worker_slot to inbox_worker;
grant insert (consumer_name, slot_no) on integration.consumer_worker_slot to inbox_worker;
grant update (held_by, held_until, updated_at) on integration.consumer_worker_slot to inbox_worker;
