-- Quarantine policy `hold-aggregate` (functions/consumers/types.ts): while a row of an
-- aggregate is QUARANTINED, the aggregate's later rows are not claimed (no attempt spent,
-- no version gap met behind it) until an operator replays or resolves that row. Seed 000:
-- "commit Kafka offset only if policy allows quarantine progress".
--
-- The hold is the lane's: held_by names the QUARANTINED row that holds it. A held lane is
-- never claimed and never deleted while rows are queued behind it; rows keep arriving and
-- mark it as usual.

alter table integration.consumer_lane
    add column held_by uuid null;

-- A held lane is not claimable: it leaves the claim's index.
drop index integration.consumer_lane_due_idx;
create index consumer_lane_due_idx
on integration.consumer_lane (consumer_name, due_at)
where due_at is not null and locked_by is null and held_by is null;

-- Held lanes, for the gauges and for releasing a hold when its row leaves quarantine.
create index consumer_lane_held_by_idx
on integration.consumer_lane (held_by)
where held_by is not null;

-- The lane triggers (0050), and one more duty: a hold ends, whoever the writer, as soon as
-- the row holding it leaves QUARANTINED (an operator's replay makes it due, a resolve makes
-- it IGNORED); the lane is then due now, and its head, the replayed row or the one behind
-- the resolved one, goes first.
create or replace function integration.consumer_inbox_mark_lanes() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    insert into integration.consumer_lane as l (consumer_name, aggregate_type, aggregate_id, due_at)
    select q.consumer_name, q.aggregate_type, q.aggregate_id, min(coalesce(q.next_attempt_at, now()))
    from queued q
    where q.status in ('RECEIVED', 'RETRY_PENDING')
    group by q.consumer_name, q.aggregate_type, q.aggregate_id
    order by q.consumer_name collate "C", q.aggregate_type collate "C", q.aggregate_id collate "C"
    on conflict (consumer_name, aggregate_type, aggregate_id)
    do update set due_at = least(l.due_at, excluded.due_at), updated_at = now();

    if tg_op = 'UPDATE' then
        update integration.consumer_lane l
        set held_by = null, due_at = now(), updated_at = now()
        where l.held_by = any(array(select q.inbox_id from queued q where q.status <> 'QUARANTINED'));
    end if;
    return null;
end
$$;

-- The worker holds a lane when a run stops at a quarantine (release-lanes.ts), the reaper
-- when an expired lease was the last attempt and when it ends a hold whose row is gone;
-- ops stats lists the held aggregates (stats.ts heldAggregates).
grant update (held_by) on integration.consumer_lane to inbox_worker, inbox_reaper;
grant select on integration.consumer_lane to inbox_ops;
