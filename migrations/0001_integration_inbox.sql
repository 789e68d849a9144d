-- The inbox and the raw poison table, exactly as the case inbox design defines them (docs/design.md §11).
-- Forward-only: never edit this file after it has been applied; add a new one.

create schema if not exists integration;

create table integration.consumer_inbox (
    inbox_id              uuid primary key default gen_random_uuid(),

    consumer_name         text not null,
    event_id              text not null,
    event_type            text not null,
    event_version         integer not null,

    aggregate_type        text not null,
    aggregate_id          text not null,

    topic_name            text not null,
    partition_no          integer not null,
    offset_no             bigint not null,

    correlation_id        text null,
    causation_id          text null,
    producer              text not null,

    occurred_at           timestamptz not null,
    received_at           timestamptz not null default now(),

    status                text not null,
    attempt_count         integer not null default 0,
    next_attempt_at       timestamptz null,

    locked_by             text null,
    locked_at             timestamptz null,

    processed_at          timestamptz null,
    quarantined_at        timestamptz null,

    error_code            text null,
    error_message         text null,
    error_detail          jsonb null,

    payload               jsonb not null,
    headers               jsonb not null default '{}'::jsonb,

    created_at            timestamptz not null default now(),
    updated_at            timestamptz not null default now(),

    constraint consumer_inbox_status_ck check (
        status in (
            'RECEIVED',
            'PROCESSING',
            'PROCESSED',
            'RETRY_PENDING',
            'QUARANTINED',
            'IGNORED'
        )
    ),

    constraint consumer_inbox_attempt_ck check (attempt_count >= 0),
    constraint consumer_inbox_event_version_ck check (event_version > 0),

    constraint consumer_inbox_unique_event_per_consumer_uk
        unique (consumer_name, event_id)
);

create index consumer_inbox_retry_idx
on integration.consumer_inbox (consumer_name, status, next_attempt_at, received_at)
where status in ('RECEIVED', 'RETRY_PENDING');

create index consumer_inbox_aggregate_idx
on integration.consumer_inbox (aggregate_type, aggregate_id, received_at desc);

create index consumer_inbox_topic_offset_idx
on integration.consumer_inbox (topic_name, partition_no, offset_no);

create index consumer_inbox_quarantine_idx
on integration.consumer_inbox (consumer_name, quarantined_at desc)
where status = 'QUARANTINED';

create table integration.consumer_raw_poison (
    poison_id      uuid primary key default gen_random_uuid(),
    consumer_name  text not null,
    topic_name     text not null,
    partition_no   integer not null,
    offset_no      bigint not null,
    record_key     text null,
    raw_value      text null,
    headers        jsonb not null default '{}'::jsonb,
    error_message  text not null,
    created_at     timestamptz not null default now(),

    constraint consumer_raw_poison_offset_uk
        unique (consumer_name, topic_name, partition_no, offset_no)
);
