-- The operator's levers, held where every worker invocation and every ingest batch looks:
-- the database (docs/ops.md, "Pause and resume"; "Scheduled replays").
--
-- A pause used to be the worker schedule's state in EventBridge Scheduler alone. But a
-- worker runs four ways (the schedule, a wake-up from its ingest, a fan-out, a hand-over),
-- and only the first asks Scheduler. A pause is now a row here, written in the transaction
-- of its audit row; the claim, the worker slots and the ingest's wake-up gate read it in
-- the statements that decide to take work or start a worker, so a paused consumer is
-- neither processed nor woken, however its worker was invoked. The schedule is still
-- disabled as well (no invocation at all is cheaper than one that finds the pause), but
-- when Scheduler and this table disagree, this table decides.

create table integration.consumer_pause (
    consumer_name  text not null,
    -- 'worker': nothing of the consumer is claimed or processed, no worker is woken, and an
    -- inline consumer's ingest stores its rows without processing them; they wait, in
    -- order and with their attempts unspent, for the resume.
    -- 'ingest': its event-source mappings were disabled (the mappings are the lever; this
    -- row tells ops stats who did it, when and why).
    target         text not null,
    paused_by      text not null,
    reason         text null,
    paused_at      timestamptz not null default now(),
    -- The pause's row in the operator audit, written in the same transaction. (No foreign
    -- key: the audit is a trail, and nothing here should stop it from being archived.)
    audit_id       uuid not null,

    constraint consumer_pause_pk primary key (consumer_name, target),
    constraint consumer_pause_target_ck check (target in ('worker', 'ingest')),
    constraint consumer_pause_by_ck check (length(btrim(paused_by)) > 0)
);

-- A replay scheduled for later (ops schedule-replay): what to replay, who asked and why.
-- The one-time schedule's input names only replay_id; the ops function runs the replay at
-- most once, marking it ran in the replay's own transaction, so an invocation retried,
-- delivered twice or forged replays nothing twice, and nothing the event says widens it.
create table integration.scheduled_replay (
    replay_id       uuid primary key default gen_random_uuid(),
    -- The EventBridge Scheduler schedule that fires it (in the inbox's schedule group).
    schedule_name   text not null,
    -- When it may run (the schedule's at() time).
    run_at          timestamptz not null,
    -- The selection and limit, as ops replay takes them (functions/ops/queries/quarantine-action.ts).
    selection       jsonb not null,
    row_limit       integer not null,
    actor           text not null,
    reason          text not null,
    created_at      timestamptz not null default now(),
    created_audit_id uuid not null,
    -- Null until it runs; then the run's time, the Lambda request that ran it and its audit row.
    ran_at          timestamptz null,
    ran_request_id  text null,
    ran_audit_id    uuid null,

    constraint scheduled_replay_schedule_uq unique (schedule_name),
    constraint scheduled_replay_limit_ck check (row_limit between 1 and 10000),
    constraint scheduled_replay_actor_ck check (length(btrim(actor)) > 0),
    constraint scheduled_replay_reason_ck check (length(btrim(reason)) > 0),
    constraint scheduled_replay_ran_ck check ((ran_at is null) = (ran_audit_id is null))
);

-- The operator audit: the Lambda request of each action (null from the CLI), and the
-- refusal of a scheduled replay that is unknown, already ran, or not yet due.
alter table integration.operator_audit add column request_id text null;
alter table integration.operator_audit drop constraint operator_audit_action_ck;
alter table integration.operator_audit add constraint operator_audit_action_ck check (
    action in ('replay', 'resolve', 'reingest', 'pause', 'resume', 'schedule-replay', 'scheduled-replay-refused'));

-- What each role may do with them (test/db/security/privileges.ts).
-- worker, ingest (the claim, the slots, the wake-up gate, an inline ingest): whether the
-- consumer's processing is paused. reaper: the paused gauge.
grant select on integration.consumer_pause to inbox_worker, inbox_ingest, inbox_reaper;
-- ops: pause and resume (pause-targets.ts), stats and event.
-- A repeated pause keeps the first one's row (who, why, since): no UPDATE.
grant select, insert, delete on integration.consumer_pause to inbox_ops;
-- ops: schedule-replay creates the row; run-scheduled-replay marks it ran.
grant select, insert on integration.scheduled_replay to inbox_ops;
grant update (ran_at, ran_request_id, ran_audit_id) on integration.scheduled_replay to inbox_ops;
