-- The session settings of the roles the functions log in as, kept by the migration step
-- (functions/inbox/role-settings.ts) after the files, on every deploy: statement_timeout,
-- idle_in_transaction_session_timeout, idle_session_timeout and client_encoding
-- (functions/lib/session-settings.ts). The functions no longer send them in the startup
-- message, which RDS Proxy and other poolers refuse beyond user, database and
-- application_name (docs/design.md, "Connections").
--
-- A role's settings belong to the server (setdatabase 0), like the roles (0045) and their
-- plan cache mode (0090): a migration of another database on the same server may set the
-- same value at the same time ("tuple concurrently updated"), which is fine when the value
-- it set is this one. The migration role's own settings are kept in this database only
-- (in_database): the master user may serve other databases of the server as it likes.
--
-- Expand only: a release that still sends its timeouts in the startup message overrides
-- these (startup parameters win over role settings); what it meets that it did not set is
-- idle_session_timeout, which ends a session idle for minutes, as a proxy's idle timeout or a
-- failover would.
create function integration.keep_role_settings(role_name name, in_database boolean, settings text[])
returns void
language plpgsql
set search_path = pg_catalog
as $$
declare
  setting text;
  key text;
  value text;
  database_oid oid := case when in_database then (select d.oid from pg_database d where d.datname = current_database()) else 0 end;
begin
  foreach setting in array settings loop
    key := split_part(setting, '=', 1);
    value := substr(setting, length(key) + 2);
    if exists (
      select from pg_db_role_setting s
      where s.setrole = role_name::regrole and s.setdatabase = database_oid and setting = any (s.setconfig)
    ) then
      continue;
    end if;
    begin
      if in_database then
        execute format('alter role %I in database %I set %I = %L', role_name, current_database(), key, value);
      else
        execute format('alter role %I set %I = %L', role_name, key, value);
      end if;
    exception when others then
      -- "tuple concurrently updated": another database's migration set it meanwhile.
      if not exists (
        select from pg_db_role_setting s
        where s.setrole = role_name::regrole and s.setdatabase = database_oid and setting = any (s.setconfig)
      ) then
        raise;
      end if;
    end;
  end loop;
end
$$;
