-- One database role per function (README "Security"), so that the function that parses
-- arbitrary Kafka bytes cannot drop the schema, rewrite any table or read every payload.
-- The migration runner (the cluster's master user in AWS) creates and owns every object;
-- these roles own nothing and get exactly the grants their function's code uses
-- (0046_grants.sql; test/db/security/privileges.ts is the matrix a test holds them to).
--
--   inbox_ingest          every ingest function: stores inbox and poison rows, nothing else
--   inbox_ingest_inline   the ingest of an inline consumer (a member of inbox_ingest): also
--                         finishes the rows it just stored and writes its consumer's tables
--   inbox_worker          the workers: claim, complete, and the deferred consumers' tables
--   inbox_reaper          the reaper: leases, retention, gauges
--   inbox_ops             the ops function and CLI: read, replay (audited), re-ingest poison
--   inbox_relay           the outbox relay: claims, publishes and purges outbox rows
--
-- Roles belong to the server, not to one database: a server hosting several databases (the
-- test harness clones one per test file; two deploys may race) sees them created once and
-- reused. Hence the existence checks, and the exception handlers for the race between the
-- check and the CREATE/GRANT. A role that exists with more than LOGIN (superuser, createrole,
-- createdb, replication, bypassrls) is refused rather than granted to: it is not ours.
-- No password is set here: in AWS the roles authenticate with IAM tokens (rds_iam); a local
-- server's passwords are set by the tool that runs it (tools/database-roles.ts).

do $$
declare
  role_name text;
  existing pg_roles%rowtype;
begin
  foreach role_name in array array['inbox_ingest', 'inbox_ingest_inline', 'inbox_worker', 'inbox_reaper', 'inbox_ops', 'inbox_relay'] loop
    select * into existing from pg_roles where rolname = role_name;
    if not found then
      begin
        -- The defaults are the point: NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT.
        execute format('create role %I login', role_name);
      exception when duplicate_object or unique_violation then
        null; -- created meanwhile by a migration of another database on this server
      end;
    elsif existing.rolsuper or existing.rolcreaterole or existing.rolcreatedb or existing.rolreplication or existing.rolbypassrls then
      raise exception 'role % exists with more privileges than LOGIN; refusing to grant to it', role_name
        using errcode = 'insufficient_privilege';
    elsif not existing.rolcanlogin then
      execute format('alter role %I login', role_name);
    end if;

    -- IAM database authentication (Aurora/RDS only: the role does not exist elsewhere).
    if exists (select from pg_roles where rolname = 'rds_iam')
       and not pg_has_role(role_name, 'rds_iam', 'member') then
      begin
        execute format('grant rds_iam to %I', role_name);
      exception when unique_violation then
        null;
      end;
    end if;
  end loop;

  if not exists (
    select from pg_auth_members m
    where m.roleid = 'inbox_ingest'::regrole and m.member = 'inbox_ingest_inline'::regrole
  ) then
    begin
      grant inbox_ingest to inbox_ingest_inline;
    exception when unique_violation then
      null;
    end;
  end if;
end
$$;

-- Nothing for everyone. PostgreSQL 15 and later already keep PUBLIC from creating in the
-- public schema; its USAGE goes too: the roles that use public.notification_jobs get it by name.
revoke all on schema public from public;
-- Nor temporary tables: no function creates one. (A database-level privilege: a database
-- cloned from this one as a template, as the test harness does, starts with the default again.)
do $$
begin
  execute format('revoke temporary on database %I from public', current_database());
end
$$;

-- Objects the migrations create from now on start with no grant at all, functions included
-- (PostgreSQL grants EXECUTE on new functions to PUBLIC by default; a SECURITY DEFINER
-- helper would then be everyone's). A later migration grants what each role uses, next to
-- the CREATE, and the privilege matrix test fails until it does. Per database and per
-- creating role: this is the migration runner's own default.
alter default privileges revoke execute on functions from public;
