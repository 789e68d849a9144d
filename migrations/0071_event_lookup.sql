-- ops event: "was this record poisoned before it became this inbox row?" A poison row
-- re-ingested by an operator names its inbox row; few are, so the index is partial.
create index consumer_raw_poison_resolved_inbox_idx
on integration.consumer_raw_poison (resolved_inbox_id)
where resolved_inbox_id is not null;
