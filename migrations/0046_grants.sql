-- What each function's database role may do, granted by what its code does (the SQL in
-- functions/inbox/*, one file per operation, and the consumers' handlers). Nothing ALL,
-- no ownership. test/db/security/privileges.ts holds the same matrix and fails on any
-- difference, and on any table, sequence or function that it does not list.
--
-- UPDATE is granted per column: a role may move a row through the status machine, but
-- not rewrite the event it stores (ids, type, payload, consumer, Kafka coordinates).
-- A later migration that adds a table grants its rights in the same file, and extends the
-- matrix; one that adds a column another role must write grants that column.

-- Schemas: USAGE only; CREATE stays with the owner (the migration runner).
grant usage on schema integration to inbox_ingest, inbox_worker, inbox_reaper, inbox_ops;
grant usage on schema read_model to inbox_worker;
grant usage on schema case_core to inbox_worker;
-- public holds notification-service's table (and the runner's own bookkeeping, granted to no one).
grant usage on schema public to inbox_worker, inbox_ingest_inline;

-- ---------------------------------------------------------------------------------------
-- integration.consumer_inbox

-- ingest (insert-batch.ts): INSERT … ON CONFLICT (consumer_name, event_id) DO NOTHING.
-- PostgreSQL wants SELECT on a conflict target's columns, and on nothing else: a deferred
-- consumer's ingest can tell that an event id is stored, never read a stored event.
grant insert on integration.consumer_inbox to inbox_ingest;
grant select (consumer_name, event_id) on integration.consumer_inbox to inbox_ingest;

-- inline ingest (insert-batch.ts RETURNING *, defer-behind-aggregate.ts, complete.ts):
-- reads the rows it inserted and the open rows of their aggregates, and finishes them.
grant select on integration.consumer_inbox to inbox_ingest_inline;
grant update (status, attempt_count, next_attempt_at, processed_at, quarantined_at,
              error_code, error_message, error_detail, locked_by, locked_at, lease_expires_at, updated_at)
  on integration.consumer_inbox to inbox_ingest_inline;

-- worker (claim-due.ts, lock-owned.ts, complete.ts, release-claimed.ts): no INSERT, no DELETE.
grant select on integration.consumer_inbox to inbox_worker;
grant update (status, attempt_count, next_attempt_at, processed_at, quarantined_at,
              error_code, error_message, error_detail, locked_by, locked_at, lease_expires_at, updated_at)
  on integration.consumer_inbox to inbox_worker;

-- reaper (release-expired.ts, purge.ts, gauges.ts): releases leases, purges payloads,
-- deletes finished rows past the dedupe window. Never inserts; never sets processed_at.
grant select, delete on integration.consumer_inbox to inbox_reaper;
grant update (status, next_attempt_at, quarantined_at, error_code, error_message, error_detail,
              locked_by, locked_at, lease_expires_at, updated_at, payload, headers, payload_purged_at)
  on integration.consumer_inbox to inbox_reaper;

-- ops (stats.ts, quarantine.ts, replay.ts; poison reingest through insert-batch.ts): reads,
-- replays QUARANTINED rows, stores a re-ingested record. Never deletes.
grant select, insert on integration.consumer_inbox to inbox_ops;
grant update (status, attempt_count, next_attempt_at, quarantined_at, error_code, error_message, error_detail,
              locked_by, locked_at, lease_expires_at, updated_at)
  on integration.consumer_inbox to inbox_ops;

-- ---------------------------------------------------------------------------------------
-- integration.consumer_raw_poison

-- ingest (record-poison.ts): INSERT … ON CONFLICT (the offset key) DO NOTHING RETURNING 1.
grant insert on integration.consumer_raw_poison to inbox_ingest;
grant select (consumer_name, topic_name, partition_no, offset_no) on integration.consumer_raw_poison to inbox_ingest;
-- reaper (purge.ts deletePoison, gauges.ts). deletePoison picks its batch FOR UPDATE SKIP
-- LOCKED, and a row lock needs UPDATE on some column: created_at, whose change gives the
-- reaper no power its DELETE does not (it decides the retention of these rows anyway).
grant select, delete on integration.consumer_raw_poison to inbox_reaper;
grant update (created_at) on integration.consumer_raw_poison to inbox_reaper;
-- ops (poison.ts): list, show, and mark resolved after a re-ingest.
grant select on integration.consumer_raw_poison to inbox_ops;
grant update (resolved_at, resolved_inbox_id, resolved_by) on integration.consumer_raw_poison to inbox_ops;

-- ---------------------------------------------------------------------------------------
-- integration.consumer_claim_lock: the worker's claim (claim-due.ts) upserts its row
-- (ON CONFLICT (consumer_name) DO UPDATE SET last_claim_at).

grant insert on integration.consumer_claim_lock to inbox_worker;
grant select (consumer_name) on integration.consumer_claim_lock to inbox_worker;
grant update (last_claim_at) on integration.consumer_claim_lock to inbox_worker;

-- ---------------------------------------------------------------------------------------
-- integration.consumer_replay_audit: ops replay writes the trail (INSERT … RETURNING *)
-- in the transaction of the replay.

grant select, insert on integration.consumer_replay_audit to inbox_ops;

-- ---------------------------------------------------------------------------------------
-- The reference consumers' tables: what their handlers write (functions/consumers/*).
-- Deferred consumers run in the worker; an inline consumer runs in its ingest function and,
-- for rows handed on or retried, in the worker.

-- case-projection (deferred): upsert and versioned update of the case summary.
grant select, insert, update on read_model.case_summary to inbox_worker;
-- case-sla (deferred): insert-if-absent of the obligation (ON CONFLICT DO NOTHING, no target).
grant insert on case_core.sla_obligation to inbox_worker;
-- notification-service (inline): one job per payment.
grant insert on public.notification_jobs to inbox_ingest_inline, inbox_worker;
