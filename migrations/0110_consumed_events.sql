-- Rows leave the inbox when their payload retention ends; their dedupe key stays here, in
-- a narrow table of the payments inbox design's consumed_events shape, until the dedupe window ends
-- (docs/reaper.md). A key kept as a whole inbox row (every column, seven index entries)
-- costs several times what it costs here (one row of a dozen small columns, two index
-- entries), and leaving is one delete where purging the payload in place rewrote the row.
--
-- A key holds what `ops event` and `ops stats` need once the row is gone: its final status
-- and times, where it came from in Kafka, the id it had in the inbox (a re-ingested poison
-- row names it), and when its dedupe window ends.
create table integration.consumed_events (
    consumer_name   text not null,
    event_id        text not null,
    inbox_id        uuid not null,
    event_type      text not null,
    status          text not null,
    topic_name      text not null,
    partition_no    integer not null,
    offset_no       bigint not null,
    received_at     timestamptz not null,
    processed_at    timestamptz not null,
    -- Set when the row was quarantined before an operator resolved it.
    quarantined_at  timestamptz null,
    -- OPERATOR_RESOLVED marks a row an operator resolved; null otherwise.
    error_code      text null,
    -- The key counts as seen until then: processed_at plus the consumer's dedupe window
    -- when the row left the inbox. Retention deletes it after.
    dedupe_until    timestamptz not null,

    constraint consumed_events_pk primary key (consumer_name, event_id),
    constraint consumed_events_status_ck check (status in ('PROCESSED', 'IGNORED'))
);

-- Retention (purge.ts deleteExpiredKeys): the keys whose window has ended, oldest first,
-- as one index range per consumer.
create index consumed_events_dedupe_until_idx
on integration.consumed_events (consumer_name, dedupe_until);

-- Keys are inserted once and deleted once, in batches: vacuum after ~1% changed, as the inbox.
alter table integration.consumed_events set (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.01
);

-- Ingest's statement skips the events whose key is here (insert-batch.ts), reading the
-- table as of the statement's start. A key that arrives here while the statement runs
-- (the reaper moved its row, and the insert waited on the row's unique-key entry for that
-- move to commit) would pass both checks: the inbox row is gone and the key was not yet
-- visible. This trigger reads the keys again after the inserts, with a snapshot that sees
-- the move, and refuses the statement with a serialization failure: the ingest reports
-- its batch back to the event-source mapping (a transient error), and the redelivery
-- meets the key. One probe of the primary key per inserted row, per statement.
create function integration.consumer_inbox_keys_not_consumed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    if exists (
        select 1
        from inserted_rows n
        join integration.consumed_events c
          on c.consumer_name = n.consumer_name and c.event_id = n.event_id
    ) then
        raise exception 'an inserted event''s key left the inbox while the statement ran'
            using errcode = 'serialization_failure';
    end if;
    return null;
end
$$;

create trigger consumer_inbox_keys_not_consumed
after insert on integration.consumer_inbox
referencing new table as inserted_rows
for each statement execute function integration.consumer_inbox_keys_not_consumed();

-- What each role may do with the keys (test/db/security/privileges.ts).
-- ingest (insert-batch.ts): whether an event id's key is kept; nothing else of it.
grant select (consumer_name, event_id) on integration.consumed_events to inbox_ingest;
-- reaper (purge.ts): moves keys in when rows leave, deletes them when their window ends.
grant select, insert, delete on integration.consumed_events to inbox_reaper;
-- ops (find-event.ts, stats.ts): an event's story and the received counts once rows left.
grant select on integration.consumed_events to inbox_ops;
