-- The outbox relay per emitting consumer: a relay role per consumer that emits events,
-- outbox lanes keyed by their consumer, and row-level security on the outbox and its lanes
-- so that a consumer's relay sees and changes only its own consumer's rows (README
-- "Security").
--
-- A relay's code reads every emitted payload it publishes and marks rows published: shared
-- by every emitting consumer, one consumer's relay could publish, hold back or mark
-- published another's events. Each relay function logs in as its consumer's role,
--   inbox_relay_<consumer>   member of inbox_relay
-- (the consumer's name with '-' as '_'), created for the consumers that declare `emits` by
-- the migration step that reads the declarations (functions/inbox/consumer-roles.ts), after
-- the files, as 0130's ingest and worker roles are. inbox_relay keeps the grants of 0081 and
-- becomes a group that cannot log in.
--
-- The lanes were keyed by aggregate alone, one lane for every consumer's events of an
-- aggregate. A lane is now one consumer's events of one aggregate: an aggregate's order is
-- kept per emitting consumer, which is the order a consumer's events have (each consumer
-- emits its own event types; two consumers' events of one aggregate were never ordered
-- against each other by anything but the relay's claim).
--
-- One transaction (as every file): a failure leaves nothing applied, and the file runs again
-- whole. The outbox is locked against inserts (SHARE ROW EXCLUSIVE: reads, the relay's
-- updates and deletes go on) while the lanes are rekeyed, so that no emitter's trigger
-- writes a lane by the old key in between; the lanes are one row per aggregate with a
-- backlog, and their rekeying reads the outbox's backlog only (outbox_unpublished_lane_idx),
-- so the lock lasts as long as the backlog's lanes take to copy.

lock table integration.outbox in share row exclusive mode;

-- ---------------------------------------------------------------------------------------
-- The consumer roles' mapping knows relay roles.
alter table integration.consumer_role drop constraint consumer_role_kind_ck;
alter table integration.consumer_role
  add constraint consumer_role_kind_ck check (kind in ('ingest', 'worker', 'relay'));

grant execute on function integration.consumer_of_role(name) to inbox_relay;

-- ---------------------------------------------------------------------------------------
-- The lanes, keyed by (consumer_name, aggregate_type, aggregate_id). Each lane of the old
-- key becomes one lane per consumer with unpublished rows of its aggregate, each with the
-- old lane's state: a relay holding the aggregate holds each of them, until its release
-- (fenced on its owner) or its lease's end. A lane with nothing unpublished goes, as the
-- next claim would have deleted it.
alter table integration.outbox_lane add column if not exists consumer_name text;
alter table integration.outbox_lane drop constraint if exists outbox_lane_pk;

insert into integration.outbox_lane (consumer_name, aggregate_type, aggregate_id, due_at, locked_by, locked_at, lease_expires_at, updated_at)
select c.consumer_name, l.aggregate_type, l.aggregate_id, l.due_at, l.locked_by, l.locked_at, l.lease_expires_at, now()
from integration.outbox_lane l
cross join lateral (
  select distinct o.consumer_name
  from integration.outbox o
  where o.aggregate_type = l.aggregate_type
    and o.aggregate_id = l.aggregate_id
    and o.published_at is null
) c
where l.consumer_name is null;

delete from integration.outbox_lane where consumer_name is null;

alter table integration.outbox_lane alter column consumer_name set not null;
alter table integration.outbox_lane
  add constraint outbox_lane_pk primary key (consumer_name, aggregate_type, aggregate_id);

-- A relay claims its own consumer's due lanes, oldest first, and those whose lease ran
-- out: the claim's ranges lead with the consumer.
drop index integration.outbox_lane_due_idx;
create index outbox_lane_due_idx
on integration.outbox_lane (consumer_name, due_at)
where due_at is not null and locked_by is null;

drop index integration.outbox_lane_lease_idx;
create index outbox_lane_lease_idx
on integration.outbox_lane (consumer_name, lease_expires_at)
where locked_by is not null;

-- The lane trigger of 0081, by the new key; lanes locked in "C" order of the key, as every
-- statement that locks several lanes takes them (functions/lib/lane-key.ts).
create or replace function integration.outbox_mark_lanes() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into integration.outbox_lane as l (consumer_name, aggregate_type, aggregate_id, due_at)
    select e.consumer_name, e.aggregate_type, e.aggregate_id, now()
    from emitted e
    where e.published_at is null
    group by e.consumer_name, e.aggregate_type, e.aggregate_id
    order by e.consumer_name collate "C", e.aggregate_type collate "C", e.aggregate_id collate "C"
    on conflict (consumer_name, aggregate_type, aggregate_id)
    do update set due_at = least(l.due_at, excluded.due_at), updated_at = now();
    return null;
end
$$;

-- ---------------------------------------------------------------------------------------
-- Row-level security: a consumer's relay role sees, changes and deletes only its own
-- consumer's outbox rows and lanes; the policy's consumer is looked up once per statement
-- (an InitPlan, as in 0130). Every condition the relay's statements put on these tables is
-- a leakproof comparison (text, bigint, timestamptz, tid equality and order), so their
-- index conditions and statistics are kept under the policy. The reaper and the ops
-- function keep their policy over every consumer's rows. The emitters' lane trigger runs
-- as the owner, who is not subject to the policies.
alter policy own_consumer_rows on integration.outbox to inbox_ingest, inbox_worker, inbox_relay;
alter policy every_consumer_rows on integration.outbox to inbox_reaper, inbox_ops;

alter table integration.outbox_lane enable row level security;
create policy own_consumer_rows on integration.outbox_lane as permissive for all to inbox_relay
  using (consumer_name = (select integration.consumer_of_role(current_user)))
  with check (consumer_name = (select integration.consumer_of_role(current_user)));
create policy every_consumer_rows on integration.outbox_lane as permissive for all to inbox_reaper, inbox_ops
  using (true) with check (true);

-- ---------------------------------------------------------------------------------------
-- inbox_relay is a group, as 0130 made inbox_ingest and inbox_worker: a relay function logs
-- in as its consumer's role (a kind role that logged in would match no consumer's rows).
do $$
begin
  if exists (select from pg_roles where rolname = 'inbox_relay' and rolcanlogin) then
    begin
      execute 'alter role inbox_relay nologin';
    exception when others then
      -- "tuple concurrently updated": another database's migration changed it meanwhile.
      if exists (select from pg_roles where rolname = 'inbox_relay' and rolcanlogin) then
        raise;
      end if;
    end;
  end if;
end
$$;
