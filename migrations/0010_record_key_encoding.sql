-- Kafka keys are bytes. A key that is valid UTF-8 (and free of NUL, which text refuses) is
-- stored as text; any other key as its base64, and this column says which, so that no key
-- is dropped and none is ambiguous. Adding a column with a constant default rewrites nothing.

alter table integration.consumer_inbox
    add column record_key_encoding text not null default 'utf8',
    add constraint consumer_inbox_record_key_encoding_ck check (record_key_encoding in ('utf8', 'base64'));

alter table integration.consumer_raw_poison
    add column record_key_encoding text not null default 'utf8',
    add constraint consumer_raw_poison_record_key_encoding_ck check (record_key_encoding in ('utf8', 'base64'));
