-- One trail for every operator action: replay, resolve, reingest (poison), pause, resume
-- and schedule-replay. Who, when, why, what was asked, how many rows or resources it
-- changed, and whether it was a dry run. An action on inbox rows writes its row in the same
-- transaction as its update, so the change and its trail commit together or not at all;
-- an action on AWS (pause, resume, schedule-replay) writes it once the AWS calls are done,
-- with what each call changed (docs/ops.md, "Audit").
--
-- It replaces integration.consumer_replay_audit (0040): the replays recorded there move
-- here unchanged (same audit ids and times), and the old name stays readable as a view of
-- the replays, with its old columns.

create table integration.operator_audit (
    audit_id        uuid primary key default gen_random_uuid(),
    action          text not null,
    -- The operator (CLI: --actor or the OS user; Lambda: the caller's actor argument). A dry
    -- run may be anonymous: it changes nothing.
    actor           text null,
    reason          text null,
    -- 'cli', 'lambda' or 'schedule' (a one-time schedule made by ops schedule-replay).
    source          text not null,
    dry_run         boolean not null default false,
    -- The consumers whose rows or resources the action concerned.
    consumer_names  text[] not null default '{}',
    -- What was asked, as given: a replay's {"selection": …, "limit": n}, a pause's targets…
    request         jsonb not null default '{}'::jsonb,
    -- How many rows or resources the action changed (a dry run: would have changed).
    affected_count  integer not null,
    -- The inbox rows it changed (a dry run: would have changed), for "what happened to X?".
    inbox_ids       uuid[] not null default '{}',
    -- What it found and did beyond the ids: prior error codes, previous AWS states, …
    outcome         jsonb not null default '{}'::jsonb,
    created_at      timestamptz not null default now(),

    constraint operator_audit_action_ck check (
        action in ('replay', 'resolve', 'reingest', 'pause', 'resume', 'schedule-replay')),
    constraint operator_audit_source_ck check (source in ('cli', 'lambda', 'schedule')),
    constraint operator_audit_actor_ck check (dry_run or length(btrim(actor)) > 0),
    -- What changes rows for good must say why; pause and resume may (the next run undoes them).
    constraint operator_audit_reason_ck check (
        dry_run or action not in ('replay', 'resolve', 'schedule-replay') or length(btrim(reason)) > 0),
    constraint operator_audit_count_ck check (
        affected_count >= 0
        and (action not in ('replay', 'resolve', 'reingest') or affected_count = cardinality(inbox_ids)))
);

insert into integration.operator_audit
    (audit_id, action, actor, reason, source, dry_run, consumer_names, request, affected_count, inbox_ids, outcome, created_at)
select audit_id, 'replay', actor, reason, source, false, consumer_names,
       jsonb_build_object('selection', selection, 'limit', row_limit),
       replayed_count, inbox_ids,
       jsonb_build_object('priorErrorCodes', prior_error_codes),
       created_at
from integration.consumer_replay_audit;

drop table integration.consumer_replay_audit;

create view integration.consumer_replay_audit as
select audit_id, actor, reason, source, consumer_names,
       request -> 'selection' as selection,
       (request ->> 'limit')::integer as row_limit,
       affected_count as replayed_count,
       inbox_ids,
       coalesce(outcome -> 'priorErrorCodes', '{}'::jsonb) as prior_error_codes,
       created_at
from integration.operator_audit
where action = 'replay' and not dry_run;

create index operator_audit_created_idx
on integration.operator_audit (created_at desc, audit_id desc);

-- "What happened to this row?": the actions that touched an inbox id.
create index operator_audit_inbox_ids_idx
on integration.operator_audit using gin (inbox_ids);

-- What ops may do with the trail (0046's matrix, test/db/security/privileges.ts): write it
-- with each action, read it (ops audit, ops event), and the old name for old queries.
grant select, insert on integration.operator_audit to inbox_ops;
grant select on integration.consumer_replay_audit to inbox_ops;
-- ops resolve finishes a quarantined row as IGNORED (resolve.ts): it sets processed_at.
grant update (processed_at) on integration.consumer_inbox to inbox_ops;
