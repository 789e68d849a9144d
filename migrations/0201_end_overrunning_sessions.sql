-- A consumer's role cannot hold the database past a bound: the reaper ends such sessions
-- (docs/reaper.md, "Sessions past the bound").
--
-- A consumer's functions run with statement and idle-in-transaction timeouts, but a role may
-- set its own (`set statement_timeout = 0`), and one team's handler, or a package it imports,
-- could then run a statement or keep a transaction open for hours: holding its row locks,
-- holding back the vacuum of every consumer's queue tables, and keeping a migration that
-- needs a table lock retrying until the deploy gives up. No Lambda invocation lives longer
-- than its function's timeout, so a consumer role's transaction older than the bound (above
-- every function's timeout) serves no invocation that can still use it.
--
-- Once a minute the reaper calls this function (executed as its owner, who may signal the
-- consumer roles' backends: a superuser locally, the master user, a member of
-- rds_superuser, on Aurora), which ends every session of a consumer's role (retired ones
-- included) in this database whose transaction began more than `bound_seconds` ago, and
-- returns them for the reaper's log and metrics. Sessions idle outside a transaction (the
-- functions' kept connections) have no transaction start and are left alone; so are every
-- other role's sessions (the migrations', the operators', the reaper's own).
--
-- Expand only: a new function, executed by the reaper of this release.
create function integration.end_overrunning_sessions(bound_seconds double precision)
returns table (pid integer, role_name name, consumer_name text, state text, transaction_seconds double precision, ended boolean)
language sql volatile security definer
set search_path = pg_catalog, pg_temp
as $$
  select a.pid, a.usename, r.consumer_name, a.state,
         extract(epoch from clock_timestamp() - a.xact_start)::float8,
         pg_terminate_backend(a.pid)
  from pg_stat_activity a
  join integration.consumer_role r on r.role_name = a.usename
  where a.datname = current_database()
    and a.backend_type = 'client backend'
    and a.pid <> pg_backend_pid()
    and a.xact_start < clock_timestamp() - make_interval(secs => bound_seconds)
$$;
grant execute on function integration.end_overrunning_sessions(double precision) to inbox_reaper;
