-- Every statement of the functions' roles is planned for the table sizes and the values of
-- the moment it runs (plan_cache_mode = force_custom_plan), never from a plan cached earlier.
--
-- postgres.js prepares each statement once per connection, and after five executions
-- PostgreSQL may keep one generic plan for it, made for the table sizes of that moment. A
-- worker that polled a nearly empty inbox (its idle interval is forty empty claims) kept a
-- plan made for tables of a few rows: sequential scans of the inbox and the lanes, once per
-- lane. When a burst arrived on the same connection, one claim of 100 rows over a
-- 20,000-aggregate backlog took 1.3 s against 35 ms on a fresh connection
-- (test/db/worker/claim-plan.test.ts keeps such a worker to the claim's buffer budget). The
-- price is planning each execution: about 1.5 ms of a claim's 10 ms. Behind RDS Proxy
-- (DB_PREPARE=false) statements are unnamed and were planned this way already.
--
-- A role's settings belong to the server, like the roles (0045): set once, and a migration
-- of another database on the same server racing this one sets the same value.
do $$
declare
  role_name text;
  is_set boolean;
begin
  foreach role_name in array array['inbox_ingest', 'inbox_ingest_inline', 'inbox_worker', 'inbox_reaper', 'inbox_ops', 'inbox_relay'] loop
    select exists (
      select 1 from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
      where r.rolname = role_name and s.setdatabase = 0 and 'plan_cache_mode=force_custom_plan' = any (s.setconfig)
    ) into is_set;
    if not is_set then
      begin
        execute format('alter role %I set plan_cache_mode = force_custom_plan', role_name);
      exception when others then
        -- "tuple concurrently updated": another database's migration set it meanwhile.
        select exists (
          select 1 from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
          where r.rolname = role_name and s.setdatabase = 0 and 'plan_cache_mode=force_custom_plan' = any (s.setconfig)
        ) into is_set;
        if not is_set then
          raise;
        end if;
      end;
    end if;
  end loop;
end
$$;
