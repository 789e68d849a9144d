-- A consumer's roles delete the rows of shared tables through functions, not with a
-- table-level DELETE (README "Security", docs/migrations.md "Contracts waiting for the next
-- release").
--
-- PostgreSQL lets a role that holds UPDATE, DELETE or TRUNCATE on a table (MAINTAIN too,
-- from 17) take any LOCK TABLE mode on it; INSERT allows ROW EXCLUSIVE, SELECT ACCESS
-- SHARE, and privileges on columns none (neither conflicts with another session's reads
-- and writes). The workers' DELETE on integration.consumer_lane and the relays' on
-- integration.outbox and integration.outbox_lane are table-level: with them, one consumer's
-- handler (or a package it imports) could hold `LOCK TABLE … IN ACCESS EXCLUSIVE MODE` and
-- stall every consumer's ingest, workers and relays.
--
-- So the deletes those functions make become SECURITY DEFINER functions, executed by the
-- kind's group: each deletes only rows of the consumer of the session's login role
-- (session_user, which SET ROLE does not change), and only the rows its one caller deletes.
--
-- Expand: this release's worker and relay call them. The release before this one deletes
-- with its table-level privilege, which stays until the next release revokes it
-- (migrations/next/0001_revoke_consumer_table_deletes.sql): that contract may land in the
-- release after this one, whose deploy runs under this release's functions.

-- ---------------------------------------------------------------------------------------
-- The consumer whose rows the session may delete through the functions below: asked, when
-- the session's login role is that consumer's; any, when it is no consumer's role (the owner,
-- in tests and the local run: only the owner can reach these functions without being a
-- member of a consumer kind). A consumer's role asking for another consumer's rows, or a
-- retired role, is refused with 42501. Not granted: called inside the functions below.
create function integration.deletable_consumer(asked text) returns text
language plpgsql stable
set search_path = pg_catalog, pg_temp
as $$
declare
  mine text;
begin
  if not integration.is_consumer_role(session_user) then
    return asked;
  end if;
  mine := integration.consumer_of_role(session_user);
  if mine is null or asked is distinct from mine then
    raise exception 'role % may not delete rows of consumer %', session_user, coalesce(asked, '(every consumer)')
      using errcode = 'insufficient_privilege';
  end if;
  return mine;
end
$$;

-- The worker's claim (functions/inbox/claim-due.ts): the lanes it locked and found empty, by
-- the row versions it locked (ctid). Nobody else can change a lane the claim holds, so the
-- versions are still the claim's when this runs inside its statement.
create function integration.delete_claimed_lanes(consumer text, lanes tid[]) returns integer
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  mine text := integration.deletable_consumer(consumer);
  deleted integer;
begin
  delete from integration.consumer_lane l
  where l.ctid = any(lanes)
    and (mine is null or l.consumer_name = mine);
  get diagnostics deleted = row_count;
  return deleted;
end
$$;
grant execute on function integration.delete_claimed_lanes(text, tid[]) to inbox_worker;

-- The relay's claim (functions/outbox/claim-outbox.ts): its locked lanes with nothing left
-- unpublished, by the row versions it locked. Every consumer's for the owner (consumer null).
create function integration.delete_claimed_outbox_lanes(consumer text, lanes tid[]) returns integer
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  mine text := integration.deletable_consumer(consumer);
  deleted integer;
begin
  delete from integration.outbox_lane l
  where l.ctid = any(lanes)
    and (mine is null or l.consumer_name = mine);
  get diagnostics deleted = row_count;
  return deleted;
end
$$;
grant execute on function integration.delete_claimed_outbox_lanes(text, tid[]) to inbox_relay;

-- The relay's release (functions/outbox/release-outbox-lanes.ts): of the lanes it handed
-- back, those nobody holds and nothing made due since (the emitters' trigger sets due_at,
-- re-checked on the latest row version). The lanes by key, in the caller's order.
create function integration.delete_idle_outbox_lanes(consumers text[], aggregate_types text[], aggregate_ids text[])
returns integer
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  asked text;
  deleted integer;
begin
  foreach asked in array array(select distinct c from unnest(consumers) c) loop
    perform integration.deletable_consumer(asked);
  end loop;
  delete from integration.outbox_lane l
  using unnest(consumers, aggregate_types, aggregate_ids) as v(consumer_name, aggregate_type, aggregate_id)
  where l.consumer_name = v.consumer_name
    and l.aggregate_type = v.aggregate_type
    and l.aggregate_id = v.aggregate_id
    and l.locked_by is null
    and l.due_at is null;
  get diagnostics deleted = row_count;
  return deleted;
end
$$;
grant execute on function integration.delete_idle_outbox_lanes(text[], text[], text[]) to inbox_relay;

-- The relay's retention (functions/outbox/purge-outbox.ts): its consumer's published rows
-- older than `older_than_days`, oldest first, at most `row_limit`. Unpublished rows never.
create function integration.delete_published_outbox(consumer text, older_than_days integer, row_limit integer) returns integer
language plpgsql security definer
set search_path = pg_catalog, pg_temp
as $$
declare
  mine text := integration.deletable_consumer(consumer);
  deleted integer;
begin
  if mine is null then
    raise exception 'name the consumer whose published outbox rows to delete' using errcode = 'invalid_parameter_value';
  end if;
  delete from integration.outbox o
  where o.outbox_seq = any(array(
      select p.outbox_seq
      from integration.outbox p
      where p.consumer_name = mine
        and p.published_at < now() - make_interval(days => older_than_days)
      order by p.published_at
      limit row_limit));
  get diagnostics deleted = row_count;
  return deleted;
end
$$;
grant execute on function integration.delete_published_outbox(text, integer, integer) to inbox_relay;
