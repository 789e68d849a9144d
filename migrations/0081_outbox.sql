-- The transactional outbox: events a handler emits in its processing transaction
-- (functions/framework/handler-context.ts), published to Kafka afterwards by the relay
-- (functions/relay/). A row commits with the side effect and the inbox row's status, or
-- not at all; the relay publishes it at least once and marks it published, so downstream
-- sees every emitted event, keyed by an event id that never changes.

create table integration.outbox (
    -- Emission order. Per aggregate it is the order the relay publishes in.
    outbox_seq         bigint generated always as identity primary key,
    -- Derived from (consumer_name, source_event_id, event_type, ordinal): processing the
    -- same inbox row again emits the same event id, never a second, different event.
    event_id           uuid not null,
    -- The consumer that emitted it and the inbox event whose processing did.
    consumer_name      text not null,
    source_event_id    text not null,
    -- The n-th event of this type emitted for the source event (0-based).
    ordinal            integer not null,

    topic_name         text not null,
    event_type         text not null,
    event_version      integer not null,
    aggregate_type     text not null,
    -- Also the Kafka partition key: one aggregate, one partition, its order kept.
    aggregate_id       text not null,
    producer           text not null,
    correlation_id     text null,
    occurred_at        timestamptz not null default now(),
    payload            jsonb not null,

    -- Publishing. claimed_by: the relay invocation holding the row (its lane's owner);
    -- published_at: the broker acknowledged it. A refused publish counts an attempt and
    -- delays the aggregate's head until next_attempt_at.
    claimed_by         text null,
    claimed_at         timestamptz null,
    attempt_count      integer not null default 0,
    next_attempt_at    timestamptz null,
    last_error_code    text null,
    last_error_message text null,
    published_at       timestamptz null,
    created_at         timestamptz not null default now(),

    constraint outbox_event_id_uk unique (event_id),
    constraint outbox_emission_uk unique (consumer_name, source_event_id, event_type, ordinal),
    constraint outbox_ordinal_ck check (ordinal >= 0),
    constraint outbox_event_version_ck check (event_version > 0),
    constraint outbox_attempt_ck check (attempt_count >= 0),
    constraint outbox_claim_ck check ((claimed_by is null) = (claimed_at is null)),
    constraint outbox_published_ck check (published_at is null or claimed_by is null)
);

-- An aggregate's unpublished rows in publishing order: the relay reads a lane's run here.
-- Published rows leave it, so it holds the backlog only, whatever the history.
create index outbox_unpublished_lane_idx
on integration.outbox (aggregate_type, aggregate_id, outbox_seq)
where published_at is null;

-- The gauges: unpublished depth and oldest unpublished age per emitting consumer.
create index outbox_unpublished_age_idx
on integration.outbox (consumer_name, created_at)
where published_at is null;

-- Retention: published rows, oldest first, per emitting consumer.
create index outbox_published_idx
on integration.outbox (consumer_name, published_at)
where published_at is not null;

-- One row per aggregate with unpublished events, as the worker's consumer_lane is for
-- inbox rows (migration 0050): the relay claims lanes with FOR UPDATE SKIP LOCKED and
-- owns an aggregate while it publishes, so two relays never publish one aggregate's
-- events at the same time and its order holds across relays. The outbox stays the truth;
-- a lane says when its aggregate may have a due head and who holds it.
create table integration.outbox_lane (
    aggregate_type    text not null,
    aggregate_id      text not null,
    -- When the lane is worth a look; null while held with nothing arrived since the claim.
    due_at            timestamptz null,
    -- The relay invocation publishing this aggregate, and until when (never beyond that
    -- invocation's deadline): an expired lease is taken over by the next claim.
    locked_by         text null,
    locked_at         timestamptz null,
    lease_expires_at  timestamptz null,
    updated_at        timestamptz not null default now(),

    constraint outbox_lane_pk primary key (aggregate_type, aggregate_id),
    constraint outbox_lane_lock_ck check ((locked_by is null) = (locked_at is null) and (locked_by is null) = (lease_expires_at is null))
);

create index outbox_lane_due_idx
on integration.outbox_lane (due_at)
where due_at is not null and locked_by is null;

create index outbox_lane_lease_idx
on integration.outbox_lane (lease_expires_at)
where locked_by is not null;

-- Every statement that inserts outbox rows marks their lanes, whoever the writer: the lane
-- is created, or becomes due now. The lane is written even when it is already due: the
-- claim locks a lane by the row version its snapshot saw, so a lane written since is
-- skipped rather than judged empty by a snapshot that cannot see the new rows; a held
-- lane gets due_at set, which its release reads as "something arrived". Lanes in "C"
-- order, as every statement that locks several lanes takes them, so none deadlock.
-- The lanes are the outbox's own bookkeeping: the function runs as its owner (SECURITY
-- DEFINER, catalog search path), so a role that may emit needs no privilege on the lanes.
create function integration.outbox_mark_lanes() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into integration.outbox_lane as l (aggregate_type, aggregate_id, due_at)
    select e.aggregate_type, e.aggregate_id, now()
    from emitted e
    where e.published_at is null
    group by e.aggregate_type, e.aggregate_id
    order by e.aggregate_type collate "C", e.aggregate_id collate "C"
    on conflict (aggregate_type, aggregate_id)
    do update set due_at = least(l.due_at, excluded.due_at), updated_at = now();
    return null;
end
$$;

create trigger outbox_mark_lanes_on_insert
after insert on integration.outbox
referencing new table as emitted
for each statement execute function integration.outbox_mark_lanes();

-- Both tables churn like a queue: vacuum them early.
alter table integration.outbox set (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
alter table integration.outbox_lane set (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 500,
    autovacuum_analyze_scale_factor = 0.01,
    autovacuum_analyze_threshold = 500
);

-- What each role may do (0046's matrix, test/db/security/privileges.ts).
-- worker (insert-outbox.ts, through a handler's context.emit): INSERT … ON CONFLICT (event_id)
--   DO NOTHING RETURNING event_id; the lane trigger runs as the owner.
grant insert on integration.outbox to inbox_worker, inbox_ingest_inline;
grant select (event_id) on integration.outbox to inbox_worker, inbox_ingest_inline;
-- relay (claim-outbox.ts, complete-outbox.ts, purge-outbox.ts, outbox-gauges.ts; its lanes).
grant usage on schema integration to inbox_relay;
grant select, delete on integration.outbox to inbox_relay;
grant update (claimed_by, claimed_at, attempt_count, next_attempt_at, last_error_code, last_error_message, published_at)
  on integration.outbox to inbox_relay;
grant select, delete on integration.outbox_lane to inbox_relay;
grant update (due_at, locked_by, locked_at, lease_expires_at, updated_at) on integration.outbox_lane to inbox_relay;
