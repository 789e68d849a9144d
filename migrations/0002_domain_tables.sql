-- The reference domain's tables (docs/design.md §11): the case projection and SLA
-- obligations of the case inbox design, and notification-service's jobs of the payments inbox design.

create schema if not exists read_model;
create schema if not exists case_core;

create table read_model.case_summary (
    case_id                 text primary key,
    case_status             text not null,
    accepted_at             timestamptz null,
    last_event_id           text null,
    last_aggregate_version  bigint not null default 0,
    updated_at              timestamptz not null default now()
);

create table case_core.sla_obligation (
    obligation_id    uuid primary key default gen_random_uuid(),
    case_id          text not null,
    obligation_type  text not null,
    due_at           timestamptz not null,
    source_event_id  text not null,
    status           text not null,
    cancelled_at     timestamptz null,
    created_at       timestamptz not null default now(),

    constraint sla_obligation_status_ck check (status in ('OPEN', 'MET', 'BREACHED', 'CANCELLED'))
);

create unique index sla_obligation_case_type_uk
on case_core.sla_obligation (case_id, obligation_type)
where cancelled_at is null;

-- notification-service's job table (the payments inbox design). organization_id is this
-- service's own name for the tenant; the consumer's handler translates org_id into it.
create table public.notification_jobs (
    job_id           uuid primary key default gen_random_uuid(),
    organization_id  uuid not null,
    channel          text not null,
    payload          jsonb not null,
    status           text not null default 'PENDING',
    attempts         integer not null default 0,
    run_at           timestamptz not null default now(),
    source_event_id  text null,
    created_at       timestamptz not null default now(),

    constraint notification_jobs_status_ck check (status in ('PENDING', 'RUNNING', 'DONE', 'FAILED'))
);

-- Belt and braces behind the inbox: a second job for one event is an integrity
-- violation, never a second email.
create unique index notification_jobs_source_event_uk
on public.notification_jobs (source_event_id)
where source_event_id is not null;
