-- What the design needs beyond the case inbox design's tables.

alter table integration.consumer_inbox
    -- The envelope's aggregateVersion, for ordered (versioned) events.
    add column aggregate_version bigint null,
    -- The envelope's partitionKey and the Kafka record key, for tracing.
    add column partition_key text null,
    add column record_key text null,
    -- A dialect's tenant field (snake_case: org_id), kept so the handler can translate it.
    add column tenant_id text null,
    -- The lease: a PROCESSING row belongs to locked_by until lease_expires_at.
    add column lease_expires_at timestamptz null,
    add constraint consumer_inbox_aggregate_version_ck check (aggregate_version is null or aggregate_version >= 1),
    add constraint consumer_inbox_lease_ck check (
        status <> 'PROCESSING' or (locked_by is not null and locked_at is not null and lease_expires_at is not null)
    );

alter table integration.consumer_raw_poison
    -- A stable reason code next to the human-readable error_message.
    add column error_code text null,
    -- raw_value holds the text when the record was valid UTF-8, otherwise its base64.
    add column raw_encoding text not null default 'utf8',
    add column record_timestamp timestamptz null,
    -- Set when an operator re-ingests the record after a fix.
    add column resolved_at timestamptz null,
    add column resolved_inbox_id uuid null,
    add column resolved_by text null,
    add constraint consumer_raw_poison_encoding_ck check (raw_encoding in ('utf8', 'base64', 'none'));

create index consumer_raw_poison_created_idx
on integration.consumer_raw_poison (consumer_name, created_at);
