-- The trail of operator replays (ops replay): who moved which QUARANTINED rows back to
-- RETRY_PENDING, when, why and with what selection. Written in the same transaction as
-- the update it describes, so a replay without its audit row cannot exist. Dry runs
-- change nothing and are not recorded.

create table integration.consumer_replay_audit (
    audit_id         uuid primary key default gen_random_uuid(),
    -- The operator (CLI: --actor or the OS user; Lambda: the caller's actor argument).
    actor            text not null,
    reason           text not null,
    -- 'cli', 'lambda' or 'schedule' (a one-time schedule made by ops schedule-replay).
    source           text not null,
    -- The consumers whose rows were replayed (one for a filter; possibly several for ids).
    consumer_names   text[] not null,
    -- The selection as given: {"inboxIds": [...]} or {"consumerName": ..., "errorCode": ..., ...}.
    selection        jsonb not null,
    row_limit        integer not null,
    replayed_count   integer not null,
    inbox_ids        uuid[] not null,
    -- How many of the replayed rows carried each error code before the replay cleared it.
    prior_error_codes jsonb not null default '{}'::jsonb,
    created_at       timestamptz not null default now(),

    constraint consumer_replay_audit_reason_ck check (length(btrim(reason)) > 0),
    constraint consumer_replay_audit_actor_ck check (length(btrim(actor)) > 0),
    constraint consumer_replay_audit_source_ck check (source in ('cli', 'lambda', 'schedule')),
    constraint consumer_replay_audit_count_ck check (replayed_count = cardinality(inbox_ids))
);

create index consumer_replay_audit_created_idx
on integration.consumer_replay_audit (created_at desc);

-- "What happened to this row?": find the replays that touched an inbox id.
create index consumer_replay_audit_inbox_ids_idx
on integration.consumer_replay_audit using gin (inbox_ids);
