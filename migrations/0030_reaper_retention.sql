-- The reaper's needs: lease expiry, retention that never forgets too early, and a hot path
-- that stays small while the table holds a month of history (docs/reaper.md).

-- Finished rows lose their payload after the payload retention, but keep their dedupe key
-- until the dedupe window ends. payload is NOT NULL (the case inbox design), so a purged row holds '{}'
-- and says so here: '{}' alone could be a real, empty payload.
alter table integration.consumer_inbox
    add column payload_purged_at timestamptz null,
    -- Retention finds finished rows by processed_at; a finished row without one would be
    -- kept forever, a PROCESSED row without one is a bug worth failing loudly for.
    add constraint consumer_inbox_finished_ck check (
        status not in ('PROCESSED', 'IGNORED') or processed_at is not null
    ),
    add constraint consumer_inbox_payload_purged_ck check (
        payload_purged_at is null or status in ('PROCESSED', 'IGNORED')
    );

-- Expired leases. Only in-flight rows are in it (a few batches per consumer), so the
-- reaper's scan is tiny whatever the table's size. The claim already rewrites the row
-- (status changes, so the update is never HOT): one more small index entry per claim.
create index consumer_inbox_lease_idx
on integration.consumer_inbox (consumer_name, lease_expires_at)
where status = 'PROCESSING';

-- Retention. One index serves both steps, as two disjoint ranges per consumer:
--   payload purge:  payload_purged_at IS NULL     and processed_at < now() - payload retention
--   delete:         payload_purged_at < (cutoff)  (and processed_at < now() - dedupe window)
-- so neither step walks over rows an earlier run already handled. Queued and in-flight
-- rows are not in it; finished rows are not in the claim index (consumer_inbox_retry_idx
-- is partial on RECEIVED/RETRY_PENDING), which is what keeps the claim fast.
create index consumer_inbox_finished_idx
on integration.consumer_inbox (consumer_name, payload_purged_at, processed_at)
where status in ('PROCESSED', 'IGNORED');

-- The queue's churn (every row is inserted, claimed, finished, purged, deleted) leaves
-- dead tuples in the claim index that SKIP LOCKED scans must step over. The default
-- scale factor (0.2) waits for 20% of the table to be dead: at a month of history that
-- is tens of millions of rows. Vacuum and analyze after ~1% / ~0.5% instead, and after
-- inserts too, so the visibility map (index-only scans of the gauges) stays current.
alter table integration.consumer_inbox set (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.005,
    autovacuum_analyze_threshold = 1000
);

-- Poison rows are few but deleted in batches by the same reaper.
alter table integration.consumer_raw_poison set (
    autovacuum_vacuum_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
);
