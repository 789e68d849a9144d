-- What the worker's claim needs (functions/inbox/claim-due.ts).

-- One row per consumer, locked (FOR UPDATE, transaction-scoped) by every claim of that
-- consumer. It serializes claims so that two workers cannot both see "no row of this
-- aggregate in flight" and claim two rows of one aggregate. A row lock rather than an
-- advisory lock: row locks never pin a session behind RDS Proxy, and there is nothing to
-- hash or to collide.
create table integration.consumer_claim_lock (
    consumer_name  text primary key,
    last_claim_at  timestamptz not null default now()
);

-- Due rows in arrival order: the claim walks this from the oldest and stops after a window.
-- Partial, so finished rows leave it (and vacuum keeps it small).
create index consumer_inbox_due_arrival_idx
on integration.consumer_inbox (consumer_name, received_at)
where status in ('RECEIVED', 'RETRY_PENDING');

-- The first due row of one aggregate (lowest aggregate version, then arrival).
create index consumer_inbox_due_aggregate_idx
on integration.consumer_inbox (consumer_name, aggregate_type, aggregate_id, aggregate_version, received_at)
where status in ('RECEIVED', 'RETRY_PENDING');

-- Aggregates in flight: an aggregate with a PROCESSING row is not claimed again.
create index consumer_inbox_in_flight_aggregate_idx
on integration.consumer_inbox (consumer_name, aggregate_type, aggregate_id)
where status = 'PROCESSING';
