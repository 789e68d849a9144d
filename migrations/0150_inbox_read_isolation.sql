-- A consumer's roles read only their own consumer's inbox rows and lanes: row-level
-- security on integration.consumer_inbox and integration.consumer_lane (README "Security").
--
-- Under a policy, PostgreSQL evaluates the policy's condition before any condition of the
-- statement that is not leakproof, uses no index condition built on such an operator below
-- it, and plans such operators without the table's statistics (any policy, even
-- USING (true), for every role it applies to). Array equality is not leakproof, and only a
-- superuser could mark it so (Aurora has none): so the lane key becomes the three columns,
-- compared one by one (text = text is leakproof), and the indexes that serve the lane
-- lookups are keyed by the same columns. The lanes' lookup names the consumer as the
-- policy does, an InitPlan (functions/lib/own-consumer.ts), so that statistics cannot make
-- the policy's condition look the selective one. The claim's lookups then keep their index
-- conditions beside the policy's (test/db/worker/claim-plan.test.ts).

-- ---------------------------------------------------------------------------------------
-- The lane indexes of 0050, keyed by the lane's columns instead of one array of them (same
-- names, same conditions, same order after the key), in collate "C" (functions/lib/lane-key.ts).
-- A lookup compares all three columns in that collation, with the statuses of the index's
-- condition, and a condition uses an index column only in the column's own collation: the
-- consumer's dedupe key and consumer_inbox_aggregate_idx (default collation) cannot serve it,
-- whatever the statistics (on statistics that said "one row per aggregate", the planner took
-- consumer_inbox_aggregate_idx, a hot aggregate's whole history, as readily as these), and
-- consumer_inbox_retry_idx's condition (RECEIVED, RETRY_PENDING) is not implied by these
-- statuses.
drop index integration.consumer_inbox_open_lane_idx;
create index consumer_inbox_open_lane_idx
on integration.consumer_inbox (consumer_name collate "C", aggregate_type collate "C", aggregate_id collate "C", aggregate_version, received_at, offset_no)
where status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING');

drop index integration.consumer_inbox_in_flight_lane_idx;
create index consumer_inbox_in_flight_lane_idx
on integration.consumer_inbox (consumer_name collate "C", aggregate_type collate "C", aggregate_id collate "C", lease_expires_at)
where status = 'PROCESSING';

-- ---------------------------------------------------------------------------------------
-- Reads: a consumer kind's role (and so each consumer's role) sees its own consumer's rows
-- only, the consumer looked up once per statement (an InitPlan, as in 0130). An UPDATE or a
-- DELETE that reads the table (a WHERE on its columns, RETURNING) is held to the same rows.
--
-- Writes: what a consumer's role inserts, changes or deletes is judged by the own-rows
-- triggers of 0130, once per statement (SQLSTATE 42501 for another consumer's row). The
-- write policies let every row through to them, so that a statement that changes rows
-- without reading the table is refused whole rather than cut down to its own rows.
--
-- The reaper and the ops function keep every consumer's rows (no BYPASSRLS on Aurora); the
-- lane triggers run as the owner, who is not subject to the policies.
create procedure integration.guard_consumer_reads(target regclass)
language plpgsql
set search_path = pg_catalog, integration
as $$
begin
  execute format('alter table %s enable row level security', target);
  execute format(
    'create policy own_consumer_rows_read on %s as permissive for select to inbox_ingest, inbox_worker '
    'using (consumer_name = (select integration.consumer_of_role(current_user)))',
    target);
  execute format('create policy consumer_rows_insert on %s as permissive for insert to inbox_ingest, inbox_worker with check (true)', target);
  execute format('create policy consumer_rows_update on %s as permissive for update to inbox_ingest, inbox_worker using (true) with check (true)', target);
  execute format('create policy consumer_rows_delete on %s as permissive for delete to inbox_ingest, inbox_worker using (true)', target);
  execute format(
    'create policy every_consumer_rows on %s as permissive for all to inbox_reaper, inbox_ops '
    'using (true) with check (true)',
    target);
end
$$;

call integration.guard_consumer_reads('integration.consumer_inbox');
call integration.guard_consumer_reads('integration.consumer_lane');

-- A helper of this migration only.
drop procedure integration.guard_consumer_reads(regclass);
