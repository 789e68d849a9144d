-- The cross-consumer policies of 0130 named inbox_relay on tables the relay never reads:
-- poison, worker slots, pauses, the keys of rows that left the inbox and case_core.case_audit.
-- Harmless while the relay's roles hold no grant there; wrong the day one is added, since
-- `every_consumer_rows` would then open every consumer's rows to every consumer's relay
-- (the relay's own policies on the outbox and its lanes, 0160, hold it to its consumer's).
-- The reaper and ops keep theirs, and the helper that guards a new table names them only.
--
-- Expand-safe: no relay of this release or the one before it reads these tables (no grant),
-- so the narrower policies change nothing either runs.
alter policy every_consumer_rows on integration.consumer_raw_poison to inbox_reaper, inbox_ops;
alter policy every_consumer_rows on integration.consumer_worker_slot to inbox_reaper, inbox_ops;
alter policy every_consumer_rows on integration.consumer_pause to inbox_reaper, inbox_ops;
alter policy every_consumer_rows on integration.consumed_events to inbox_reaper, inbox_ops;
alter policy every_consumer_rows on case_core.case_audit to inbox_reaper, inbox_ops;

create or replace procedure integration.guard_consumer_rows(target regclass)
language plpgsql
set search_path = pg_catalog, integration
as $$
begin
  execute format('alter table %s enable row level security', target);
  execute format(
    'create policy own_consumer_rows on %s as permissive for all to inbox_ingest, inbox_worker '
    'using (consumer_name = (select integration.consumer_of_role(current_user))) '
    'with check (consumer_name = (select integration.consumer_of_role(current_user)))',
    target);
  execute format(
    'create policy every_consumer_rows on %s as permissive for all to inbox_reaper, inbox_ops '
    'using (true) with check (true)',
    target);
end
$$;
