-- The operator audit is kept by the database itself (docs/ops.md, "Who did it"):
--
--   * every audit row records who wrote it as the database knows it: the session's login
--     role (session_user, which SET ROLE does not change), whatever name the row gives as
--     its actor;
--   * an operator's session (the ops function's inbox_ops, or a person's own role, a member
--     of it) cannot change inbox rows, poison rows, pauses or scheduled replays unless its
--     transaction also writes the audit row of that change: a change of inbox rows must
--     be named by the transaction's audit rows, anything else needs one at least. Checked
--     when the transaction commits (the ops code writes a change first, then its trail),
--     refused with SQLSTATE 42501 otherwise, so the change never commits;
--   * an audit row cannot claim another source: `lambda` and `schedule` are the ops
--     function's (it logs in as inbox_ops, which no person does), and `schedule` marks only
--     a replay a scheduled replay ran; the creation time is the transaction's.
--
-- People who use the CLI against the database log in as roles of their own, `inbox_ops_<name>`,
-- members of inbox_ops, provisioned by the migration step for the stage's declared operators
-- (functions/inbox/operator-roles.ts) with the functions below.
--
-- Expand only. The column is nullable (the rows before it say nothing); the triggers are
-- new, and the release before this one writes every change of ops with its audit row in the
-- same transaction, as inbox_ops, with the sources it is allowed (test/db/upgrade/
-- previous-release.test.ts runs its ops). The workers', ingest's and the reaper's statements
-- pay one statement-level call each, which returns after one cached role-membership check:
-- no trigger here runs per row of theirs.

alter table integration.operator_audit add column session_role text null;

-- ---------------------------------------------------------------------------------------
-- The operators' own roles, by the migration step (the roles it made, for retiring them).
create table integration.operator_role (
    role_name   name primary key,
    created_at  timestamptz not null default now(),
    retired_at  timestamptz null
);

-- Whether the session's login role is an operator's: the ops function's, or a person's
-- (retired ones included: a session opened before the retirement may still be connected).
create function integration.is_operator_session() returns boolean
language sql stable
set search_path = pg_catalog, pg_temp
as $$
  select session_user = 'inbox_ops'
      or exists (select from integration.operator_role r where r.role_name = session_user)
$$;

-- ---------------------------------------------------------------------------------------
-- The audit row's own facts: who wrote it, when, from where.
create function integration.operator_audit_recorded() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
begin
  new.session_role := session_user;
  if not integration.is_operator_session() then
    return new; -- the owner (migrations, tests) records what it says
  end if;
  new.created_at := now();
  if new.source <> 'cli' and session_user <> 'inbox_ops' then
    raise exception 'audit source % belongs to the ops function; role % writes source cli', new.source, session_user
      using errcode = 'insufficient_privilege';
  end if;
  if new.source = 'schedule' and new.action <> 'replay' then
    raise exception 'audit source schedule marks a scheduled replay only, not %', new.action
      using errcode = 'insufficient_privilege';
  end if;
  return new;
end
$$;

create trigger operator_audit_recorded
before insert on integration.operator_audit
for each row execute function integration.operator_audit_recorded();

-- ---------------------------------------------------------------------------------------
-- Changes an operator's session made, until its transaction commits: one row per statement
-- that changed rows, checked and deleted at commit by the deferred trigger below.
create table integration.operator_change (
    change_id     bigint generated always as identity primary key,
    session_role  text not null,
    table_name    text not null,
    -- The inbox rows the statement inserted or changed; null for another table.
    inbox_ids     uuid[] null
);

-- Statement-level, after each INSERT, UPDATE or DELETE of the tables ops changes: an
-- operator's statement that changed rows records them. Everyone else's returns at once.
-- The transition tables are those the tables' other triggers collect already (the
-- inbox's own-rows and lane triggers: new rows of an insert, old rows of an update).
create function integration.operator_changes() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  ids uuid[];
  changed bigint;
begin
  if not pg_has_role(session_user, 'inbox_ops', 'USAGE') or not integration.is_operator_session() then
    return null;
  end if;
  if tg_op = 'INSERT' then
    if tg_table_name = 'consumer_inbox' then
      select array_agg(n.inbox_id) into ids from new_rows n;
    end if;
    select count(*) into changed from new_rows;
  else
    if tg_table_name = 'consumer_inbox' then
      select array_agg(o.inbox_id) into ids from old_rows o;
    end if;
    select count(*) into changed from old_rows;
  end if;
  if changed > 0 then
    insert into integration.operator_change (session_role, table_name, inbox_ids)
    values (session_user, format('%I.%I', tg_table_schema, tg_table_name), ids);
  end if;
  return null;
end
$$;

-- At commit: the transaction wrote, as the same login role, an audit row that is not a
-- dry run, and its audit rows name every inbox row the change touched.
create function integration.operator_change_audited() returns trigger
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  unnamed uuid[];
begin
  if not exists (
    select from integration.operator_audit a
    where a.created_at = now() and a.session_role = new.session_role and not a.dry_run
  ) then
    raise exception 'role % changed % without writing its audit row in the same transaction', new.session_role, new.table_name
      using errcode = 'insufficient_privilege',
            hint = 'every change ops makes is recorded in integration.operator_audit (docs/ops.md, "Who did it")';
  end if;
  select array_agg(u.id) into unnamed
  from (
    select unnest(new.inbox_ids) as id
    except
    select unnest(a.inbox_ids)
    from integration.operator_audit a
    where a.created_at = now() and a.session_role = new.session_role and not a.dry_run
  ) u;
  if unnamed is not null then
    raise exception 'role % changed % inbox row(s) that no audit row of the transaction names', new.session_role, cardinality(unnamed)
      using errcode = 'insufficient_privilege',
            hint = 'every change ops makes is recorded in integration.operator_audit (docs/ops.md, "Who did it")';
  end if;
  delete from integration.operator_change c where c.change_id = new.change_id;
  return null;
end
$$;

create constraint trigger operator_change_audited
after insert on integration.operator_change
deferrable initially deferred
for each row execute function integration.operator_change_audited();

-- The tables ops writes (test/db/security/privileges.ts): the inbox (replay, resolve,
-- poison reingest), poison (resolved by a reingest), pauses, scheduled replays; one trigger
-- per table and event, `<table>_operator_<event>s`, with the transition table it reads.
do $$
declare
  t record;
begin
  for t in
    select * from (values
      ('consumer_inbox', 'insert', 'new'),
      ('consumer_inbox', 'update', 'old'),
      ('consumer_raw_poison', 'update', 'old'),
      ('consumer_pause', 'insert', 'new'),
      ('consumer_pause', 'delete', 'old'),
      ('scheduled_replay', 'insert', 'new'),
      ('scheduled_replay', 'update', 'old')
    ) as v(table_name, event, transition)
  loop
    execute format(
      'create trigger %I after %s on integration.%I referencing %s table as %I '
      'for each statement execute function integration.operator_changes()',
      t.table_name || '_operator_' || t.event || 's', t.event, t.table_name, t.transition, t.transition || '_rows');
  end loop;
end
$$;

-- ---------------------------------------------------------------------------------------
-- The operators' roles, for the migration step: create (or re-enable) a login role, a member
-- of inbox_ops (and of rds_iam on Aurora, for IAM authentication), refusing a role that
-- exists with more than LOGIN or serves a consumer; retire the ones no longer declared.
-- Executed by the owner only.
create function integration.provision_operator_role(role_name name) returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
  existing pg_roles%rowtype;
  group_name name;
begin
  if integration.is_consumer_role(role_name) then
    raise exception 'role % serves a consumer; an operator needs a role of their own', role_name using errcode = 'duplicate_object';
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
  foreach group_name in array array['inbox_ops', 'rds_iam']::name[] loop
    if to_regrole(group_name) is not null
       and not exists (
         select from pg_auth_members m
         where m.roleid = to_regrole(group_name) and m.member = to_regrole(role_name)) then
      begin
        execute format('grant %I to %I', group_name, role_name);
      exception when unique_violation then
        null;
      end;
    end if;
  end loop;
  insert into integration.operator_role as r (role_name) values (role_name)
  on conflict on constraint operator_role_pkey do update set retired_at = null;
end
$$;

-- Retire the operators' roles not in `keep`: no login. Returns the roles it retired.
create function integration.retire_operator_roles(keep name[]) returns setof name
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
  retired name;
begin
  for retired in
    update integration.operator_role r set retired_at = now()
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
