-- One database role per consumer and function kind, and the guards that keep a consumer's
-- role to its own consumer's rows: row-level security, and own-rows triggers on the inbox's
-- and the lanes' writes (README "Security").
--
-- Several teams' consumers share one stage. A bug or a compromised dependency in one
-- consumer's handler runs with its function's database role, so that role must not be
-- shared with another consumer's function of the same kind. Each ingest and worker
-- function logs in as its consumer's own role,
--   inbox_ingest_<consumer>   member of inbox_ingest (of inbox_ingest_inline, itself a member
--                             of inbox_ingest, when the consumer is inline)
--   inbox_worker_<consumer>   member of inbox_worker
-- (the consumer's name with '-' as '_'), created by the migration step that reads the
-- consumer declarations (functions/inbox/consumer-roles.ts), after the files. The kind
-- roles keep the grants every consumer of that kind uses on the shared tables and cannot
-- log in; a consumer's domain tables are granted to its own roles only.
--
-- The reaper, the ops function and the relay keep their cross-consumer work: on Aurora a
-- role that is not a superuser cannot have BYPASSRLS, so each of them has a policy of its
-- own that lets it see every consumer's rows (and still only the columns it is granted).
-- The migration runner owns the tables, and an owner is not subject to their policies
-- (no FORCE ROW LEVEL SECURITY): the lane triggers, SECURITY DEFINER, run as the owner.

-- ---------------------------------------------------------------------------------------
-- Which consumer a role serves: written by the migration step for the declared consumers.
-- A removed consumer's row stays, retired: its role cannot log in, and should it
-- ever connect again its policies match no row.
create table integration.consumer_role (
    role_name      name primary key,
    consumer_name  text not null,
    kind           text not null,
    created_at     timestamptz not null default now(),
    retired_at     timestamptz null,

    constraint consumer_role_kind_ck check (kind in ('ingest', 'worker')),
    constraint consumer_role_kind_uq unique (consumer_name, kind)
);

-- The consumer the role `role_name` serves; null for any other role. SECURITY DEFINER so
-- that the consumer roles need no grant on the mapping; the role asked about is an
-- argument because inside the function current_user is the owner. STABLE, and called in
-- the policies as a scalar subquery `(select …)`: the planner makes it an InitPlan, run
-- once per statement, rather than a function call per row.
create function integration.consumer_of_role(role_name name) returns text
language sql stable security definer
set search_path = pg_catalog, integration
as $$
  select r.consumer_name from integration.consumer_role r
  where r.role_name = consumer_of_role.role_name and r.retired_at is null
$$;
grant execute on function integration.consumer_of_role(name) to inbox_ingest, inbox_worker;

-- Whether `role_name` is a consumer's role (retired ones included): its writes are held
-- to its consumer's rows.
create function integration.is_consumer_role(role_name name) returns boolean
language sql stable security definer
set search_path = pg_catalog, integration
as $$
  select exists (select from integration.consumer_role r where r.role_name = is_consumer_role.role_name)
$$;
-- Every function's role: the inbox's own-rows triggers (below) ask it of whoever writes.
grant execute on function integration.is_consumer_role(name) to inbox_ingest, inbox_worker, inbox_reaper, inbox_ops, inbox_relay;

-- ---------------------------------------------------------------------------------------
-- Row-level security on a table that holds the rows of several consumers (a
-- consumer_name column): one call per table. The consumer kinds' roles (and so their
-- members, the consumer roles) see, insert and change only rows of the consumer their
-- role serves; the cross-consumer functions' roles see every row. A role with no policy
-- here sees no row at all; its grants still decide which statements it may run.
create procedure integration.guard_consumer_rows(target regclass)
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
    'create policy every_consumer_rows on %s as permissive for all to inbox_reaper, inbox_ops, inbox_relay '
    'using (true) with check (true)',
    target);
end
$$;

call integration.guard_consumer_rows('integration.consumer_raw_poison');
call integration.guard_consumer_rows('integration.consumer_worker_slot');
call integration.guard_consumer_rows('integration.consumer_pause');
call integration.guard_consumer_rows('integration.outbox');
call integration.guard_consumer_rows('case_core.case_audit');
call integration.guard_consumer_rows('integration.consumed_events');

-- ---------------------------------------------------------------------------------------
-- The inbox and its lanes are guarded on writes, once per statement, by triggers instead
-- of a policy. Any policy on a table, even USING (true), makes PostgreSQL plan a statement
-- of a role it applies to without the table's statistics for operators that are not
-- leakproof, and keeps such operators out of index conditions evaluated before the policy.
-- The claim and the inline ingest find an aggregate's rows by its lane key,
-- array[consumer_name, aggregate_type, aggregate_id], and array equality is not leakproof
-- (only a superuser could mark it so, and Aurora has none): under a policy on the inbox, a
-- claim over hot aggregates read every open row of each lane and sorted them, 110 to 4,900
-- buffers per claimed row against its budget of 50; under one on the lanes, a claim after
-- a million finished rows visited 238 rows per claimed row against 120
-- (test/db/worker/claim-plan.test.ts). So a consumer's role may still read other
-- consumers' inbox rows and lanes; what it inserts, changes or deletes must be its own
-- consumer's, or the statement fails with SQLSTATE 42501 and changes nothing.
create function integration.own_consumer_rows_only() returns trigger
language plpgsql
set search_path = pg_catalog, integration
as $$
declare
  mine text;
  foreign_rows bigint;
begin
  -- The cross-consumer functions (and the owner) write any consumer's rows.
  if current_user not in ('inbox_ingest', 'inbox_ingest_inline', 'inbox_worker')
     and not integration.is_consumer_role(current_user) then
    return null;
  end if;
  mine := integration.consumer_of_role(current_user);
  if tg_op = 'INSERT' then
    select count(*) into foreign_rows from written_rows w where w.consumer_name is distinct from mine;
  else
    select count(*) into foreign_rows from changed_rows c where c.consumer_name is distinct from mine;
  end if;
  if foreign_rows > 0 then
    raise exception 'role % may not % % row(s) of another consumer in %', current_user, lower(tg_op), foreign_rows, tg_table_name
      using errcode = 'insufficient_privilege';
  end if;
  return null;
end
$$;

-- One call per table that a consumer's role writes but a policy would slow down.
create procedure integration.guard_consumer_writes(target regclass)
language plpgsql
set search_path = pg_catalog, integration
as $$
declare
  base text := (select c.relname from pg_class c where c.oid = target);
begin
  execute format('create trigger %I after insert on %s referencing new table as written_rows '
                 'for each statement execute function integration.own_consumer_rows_only()', base || '_own_inserts', target);
  execute format('create trigger %I after update on %s referencing old table as changed_rows '
                 'for each statement execute function integration.own_consumer_rows_only()', base || '_own_updates', target);
  execute format('create trigger %I after delete on %s referencing old table as changed_rows '
                 'for each statement execute function integration.own_consumer_rows_only()', base || '_own_deletes', target);
end
$$;

call integration.guard_consumer_writes('integration.consumer_inbox');
call integration.guard_consumer_writes('integration.consumer_lane');

-- Not guarded, because no consumer role can reach them: integration.outbox_lane (keyed by
-- aggregate, written by the outbox's trigger and the relay), integration.operator_audit and
-- integration.scheduled_replay (the ops function's alone).

-- ---------------------------------------------------------------------------------------
-- The consumers' domain tables go to the consumers that declare them (the migration step
-- grants each consumer's roles exactly what its declaration names), not to a whole kind.
revoke all on read_model.case_summary from inbox_worker;
revoke all on case_core.sla_obligation from inbox_worker;
revoke all on case_core.case_audit from inbox_worker;
revoke all on public.notification_jobs from inbox_worker, inbox_ingest_inline;
revoke usage on schema read_model from inbox_worker;
revoke usage on schema case_core from inbox_worker;
revoke usage on schema public from inbox_worker, inbox_ingest_inline;

-- ---------------------------------------------------------------------------------------
-- The reaper never rewrites an event: a finished row leaves the inbox whole at its payload
-- retention (0110). Whoever sets payload_purged_at (rows an earlier release purged in place
-- carry it), the row's purged form (empty payload and headers, no error detail) is written
-- by this trigger, and only on a finished row (the check below). The reaper's UPDATE grant
-- does not cover payload and headers: it cannot write an arbitrary payload.
create function integration.consumer_inbox_purged_form() returns trigger
language plpgsql
set search_path = pg_catalog, integration
as $$
begin
  new.payload := '{}'::jsonb;
  new.headers := '{}'::jsonb;
  new.error_detail := null;
  return new;
end
$$;

-- UPDATE OF fires only for statements that set payload_purged_at: the claim's and the
-- completions' updates pay nothing for it.
create trigger consumer_inbox_purged_form
before update of payload_purged_at on integration.consumer_inbox
for each row when (new.payload_purged_at is not null)
execute function integration.consumer_inbox_purged_form();

alter table integration.consumer_inbox
  add constraint consumer_inbox_purged_finished_ck
  check (payload_purged_at is null or status in ('PROCESSED', 'IGNORED')) not valid;
alter table integration.consumer_inbox validate constraint consumer_inbox_purged_finished_ck;

revoke update (payload, headers) on integration.consumer_inbox from inbox_reaper;

-- ---------------------------------------------------------------------------------------
-- The kind roles of ingest and worker are groups: a function logs in as its consumer's role. (A kind role
-- that logged in would match no consumer's rows anyway.) Roles belong to the server; a
-- migration of another database on it may have done this already.
do $$
declare
  role_name text;
begin
  foreach role_name in array array['inbox_ingest', 'inbox_ingest_inline', 'inbox_worker'] loop
    if exists (select from pg_roles where rolname = role_name and rolcanlogin) then
      begin
        execute format('alter role %I nologin', role_name);
      exception when others then
        -- "tuple concurrently updated": another database's migration changed it meanwhile.
        if exists (select from pg_roles where rolname = role_name and rolcanlogin) then
          raise;
        end if;
      end;
    end if;
  end loop;
end
$$;

-- ---------------------------------------------------------------------------------------
-- The consumer roles themselves, for the migration step: create (or re-enable) one,
-- refusing a role that exists with more than LOGIN, as 0045 does for the kind roles; and
-- retire the roles of consumers no longer declared. Executed by the owner only.
create function integration.provision_consumer_role(role_name name, consumer text, kind text, member_of name[])
returns void
language plpgsql
set search_path = pg_catalog, integration
as $$
declare
  existing pg_roles%rowtype;
  mapped text;
  group_name name;
begin
  select r.consumer_name into mapped from integration.consumer_role r where r.role_name = provision_consumer_role.role_name;
  if mapped is not null and mapped <> consumer then
    raise exception 'role % already serves consumer %, not %', role_name, mapped, consumer
      using errcode = 'duplicate_object';
  end if;

  select * into existing from pg_roles where rolname = role_name;
  if not found then
    begin
      execute format('create role %I login', role_name);
    exception when duplicate_object or unique_violation then
      null; -- created meanwhile by a migration of another database on this server
    end;
    select * into existing from pg_roles where rolname = role_name;
  end if;
  if existing.rolsuper or existing.rolcreaterole or existing.rolcreatedb or existing.rolreplication or existing.rolbypassrls then
    raise exception 'role % exists with more privileges than LOGIN; refusing to grant to it', role_name
      using errcode = 'insufficient_privilege';
  end if;
  if not existing.rolcanlogin then
    execute format('alter role %I login', role_name);
  end if;

  -- Exactly the kind's groups (and rds_iam, for IAM authentication on Aurora).
  foreach group_name in array member_of loop
    if not exists (select from pg_auth_members m where m.roleid = group_name::regrole and m.member = role_name::regrole) then
      begin
        execute format('grant %I to %I', group_name, role_name);
      exception when unique_violation then
        null;
      end;
    end if;
  end loop;
  for group_name in
    select g.rolname from pg_auth_members m join pg_roles g on g.oid = m.roleid
    where m.member = role_name::regrole and g.rolname <> 'rds_iam' and g.rolname <> all (member_of)
  loop
    execute format('revoke %I from %I', group_name, role_name);
  end loop;
  if exists (select from pg_roles where rolname = 'rds_iam')
     and not exists (
       select from pg_auth_members m join pg_roles g on g.oid = m.roleid
       where g.rolname = 'rds_iam' and m.member = role_name::regrole) then
    begin
      execute format('grant rds_iam to %I', role_name);
    exception when unique_violation then
      null;
    end;
  end if;

  -- A role's settings are its own, not its groups': the plan cache mode of 0090.
  if not exists (
    select from pg_db_role_setting s
    where s.setrole = role_name::regrole and s.setdatabase = 0 and 'plan_cache_mode=force_custom_plan' = any (s.setconfig)
  ) then
    begin
      execute format('alter role %I set plan_cache_mode = force_custom_plan', role_name);
    exception when others then
      if not exists (
        select from pg_db_role_setting s
        where s.setrole = role_name::regrole and s.setdatabase = 0 and 'plan_cache_mode=force_custom_plan' = any (s.setconfig)
      ) then
        raise;
      end if;
    end;
  end if;

  insert into integration.consumer_role (role_name, consumer_name, kind)
  values (role_name, consumer, kind)
  on conflict on constraint consumer_role_pkey do update set retired_at = null;
end
$$;

-- Retire the roles of this database's consumers that are not in `keep`: they can no
-- longer log in, and their policies match no row. Returns the roles it retired.
create function integration.retire_consumer_roles(keep name[]) returns setof name
language plpgsql
set search_path = pg_catalog, integration
as $$
declare
  retired name;
begin
  for retired in
    update integration.consumer_role r set retired_at = now()
    where r.retired_at is null and r.role_name <> all (keep)
    returning r.role_name
  loop
    if exists (select from pg_roles where rolname = retired and rolcanlogin) then
      execute format('alter role %I nologin', retired);
    end if;
    return next retired;
  end loop;
end
$$;
