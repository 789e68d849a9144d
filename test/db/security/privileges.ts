/**
 * What each function's database role may do: the one matrix that the migrations' grants
 * (migrations/0046_grants.sql and later) are held to by privileges.test.ts. Effective
 * privileges, as PostgreSQL answers has_*_privilege(): inherited ones included (the
 * inline ingest role is a member of inbox_ingest), PUBLIC's included.
 *
 * Adding a table, sequence or function in a migration: grant what each role's code uses
 * in that migration, and add the object here. An object missing from this file fails the
 * test, as does any privilege the database has and this file does not (or the reverse).
 * A consumer's domain table: the worker gets what its handlers write; an inline consumer's
 * ingest role (inbox_ingest_inline) gets the same.
 */
import { DatabaseRoles, type DatabaseRole } from '../../../functions/lib/database-roles';

const { ingest, ingestInline, worker, reaper, ops, relay } = DatabaseRoles;

/** A privilege on some columns only (UPDATE of the status machine's columns, say), or on all (`true`). */
export type Columns = true | readonly string[];

export interface TableGrant {
  select?: Columns;
  insert?: Columns;
  update?: Columns;
  references?: Columns;
  delete?: true;
  truncate?: true;
  trigger?: true;
}

/** The columns a lease owner writes when it claims, completes, defers or releases a row. */
const INBOX_LEASE_OUTCOME = [
  'status', 'attempt_count', 'next_attempt_at', 'processed_at', 'quarantined_at', 'error_code', 'error_message',
  'error_detail', 'locked_by', 'locked_at', 'lease_expires_at', 'updated_at',
] as const;

/** The raw poison table's unique key: the ON CONFLICT target of record-poison.ts. */
const POISON_OFFSET_KEY = ['consumer_name', 'topic_name', 'partition_no', 'offset_no'] as const;

/** Tables and views, schema-qualified; a role not listed has no privilege at all. */
export const TABLES: Record<string, Partial<Record<DatabaseRole, TableGrant>>> = {
  'integration.consumer_inbox': {
    // SELECT on the columns of its ON CONFLICT target only: it can tell an event id is stored, not read an event.
    [ingest]: { insert: true, select: ['consumer_name', 'event_id'] },
    [ingestInline]: { insert: true, select: true, update: INBOX_LEASE_OUTCOME },
    [worker]: { select: true, update: INBOX_LEASE_OUTCOME },
    [reaper]: {
      select: true,
      delete: true,
      update: [
        'status', 'next_attempt_at', 'quarantined_at', 'error_code', 'error_message', 'error_detail', 'locked_by',
        'locked_at', 'lease_expires_at', 'updated_at', 'payload', 'headers', 'payload_purged_at',
      ],
    },
    [ops]: {
      select: true,
      insert: true,
      update: [
        'status', 'attempt_count', 'next_attempt_at', 'processed_at', 'quarantined_at', 'error_code', 'error_message',
        'error_detail', 'locked_by', 'locked_at', 'lease_expires_at', 'updated_at',
      ],
    },
  },
  'integration.consumer_raw_poison': {
    [ingest]: { insert: true, select: POISON_OFFSET_KEY },
    [ingestInline]: { insert: true, select: POISON_OFFSET_KEY },
    // UPDATE of one column for deletePoison's FOR UPDATE SKIP LOCKED (a row lock needs UPDATE on some column).
    [reaper]: { select: true, delete: true, update: ['created_at'] },
    [ops]: { select: true, update: ['resolved_at', 'resolved_inbox_id', 'resolved_by'] },
  },
  // The claim's lanes (migration 0050). Ingest and ops write them only through
  // consumer_inbox's triggers, which run as the owner.
  'integration.consumer_lane': {
    [worker]: { select: true, insert: true, delete: true, update: ['due_at', 'held_by', 'updated_at'] },
    [reaper]: { select: true, insert: true, update: ['due_at', 'held_by', 'updated_at'] },
    [ops]: { select: true },
  },
  // Keys of rows that left the inbox (migration 0110). Ingest reads only the key, as of the
  // inbox; the reaper moves keys in and forgets them; ops reads them for event and stats.
  'integration.consumed_events': {
    [ingest]: { select: ['consumer_name', 'event_id'] },
    [ingestInline]: { select: ['consumer_name', 'event_id'] },
    [reaper]: { select: true, insert: true, delete: true },
    [ops]: { select: true },
  },
  // Who is awake per consumer (migration 0060): ingest's wake-up gate reserves slot 1,
  // workers take, renew, leave and reserve slots.
  'integration.consumer_worker_slot': {
    [ingest]: {
      select: ['consumer_name', 'slot_no', 'held_until'],
      insert: ['consumer_name', 'slot_no', 'held_by', 'held_until', 'updated_at'],
      update: ['held_by', 'held_until', 'updated_at'],
    },
    [ingestInline]: {
      select: ['consumer_name', 'slot_no', 'held_until'],
      insert: ['consumer_name', 'slot_no', 'held_by', 'held_until', 'updated_at'],
      update: ['held_by', 'held_until', 'updated_at'],
    },
    [worker]: { select: true, insert: ['consumer_name', 'slot_no'], update: ['held_by', 'held_until', 'updated_at'] },
  },
  'integration.operator_audit': {
    [ops]: { select: true, insert: true },
  },
  // A consumer's pause (migration 0100): ops records and lifts it; the claim, the slots and
  // the wake-up gate (worker, ingest) and the paused gauge (reaper) read it.
  'integration.consumer_pause': {
    [ingest]: { select: true },
    [ingestInline]: { select: true },
    [worker]: { select: true },
    [reaper]: { select: true },
    [ops]: { select: true, insert: true, delete: true },
  },
  // Replays for later (0100): schedule-replay records one; run-scheduled-replay marks it ran.
  'integration.scheduled_replay': {
    [ops]: { select: true, insert: true, update: ['ran_at', 'ran_request_id', 'ran_audit_id'] },
  },
  // A view of the replays in operator_audit, under the table name they had before 0070.
  'integration.consumer_replay_audit': {
    [ops]: { select: true },
  },
  // The outbox (migration 0081): handlers emit into it (worker; an inline consumer's ingest);
  // the relay claims, publishes and purges. Its lanes are written by its trigger (owner) and the relay.
  'integration.outbox': {
    [ingestInline]: { insert: true, select: ['event_id'] },
    [worker]: { insert: true, select: ['event_id'] },
    [relay]: {
      select: true,
      delete: true,
      update: ['claimed_by', 'claimed_at', 'attempt_count', 'next_attempt_at', 'last_error_code', 'last_error_message', 'published_at'],
    },
  },
  'integration.outbox_lane': {
    [relay]: { select: true, delete: true, update: ['due_at', 'locked_by', 'locked_at', 'lease_expires_at', 'updated_at'] },
  },
  // The case consumers' audit (migration 0080), written by their handlers in the worker.
  'case_core.case_audit': {
    [worker]: { insert: true },
  },
  'read_model.case_summary': {
    [worker]: { select: true, insert: true, update: true },
  },
  'case_core.sla_obligation': {
    // SELECT of what its insert RETURNs: did it open the obligation (audit and outbox follow)?
    [worker]: { insert: true, select: ['case_id', 'obligation_type', 'due_at', 'source_event_id'] },
  },
  'public.notification_jobs': {
    [ingestInline]: { insert: true },
    [worker]: { insert: true },
  },
  // The migration runner's bookkeeping: no function reads it.
  'public.inbox_schema_migrations': {},
};

/** Sequences (identity and serial columns), schema-qualified: the roles with USAGE (nextval). */
export const SEQUENCES: Record<string, Partial<Record<DatabaseRole, readonly ('USAGE' | 'SELECT' | 'UPDATE')[]>>> = {
  // Identity columns' sequences: an INSERT takes the next value without a grant on them.
  'case_core.case_audit_audit_id_seq': {},
  'integration.outbox_outbox_seq_seq': {},
};

/** Functions and procedures, as regprocedure text (`schema.name(argtypes)`): the roles that may EXECUTE them. */
export const FUNCTIONS: Record<string, readonly DatabaseRole[]> = {
  // consumer_inbox's lane triggers (migration 0050): SECURITY DEFINER, fired by the
  // triggers, executed by no role directly.
  'integration.consumer_inbox_lanes_of_inserted_rows()': [],
  'integration.consumer_inbox_lane_of_queued_row()': [],
  'integration.consumer_inbox_lane_hold_ends()': [],
  'integration.consumer_inbox_truncate_lanes()': [],
  // consumer_inbox's check of inserted keys against the keys that left (0110), likewise.
  'integration.consumer_inbox_keys_not_consumed()': [],
  // The outbox's lane trigger (0081), likewise.
  'integration.outbox_mark_lanes()': [],
};

/** Schemas: the roles with USAGE. CREATE belongs to the owner alone. */
export const SCHEMAS: Record<string, readonly DatabaseRole[]> = {
  integration: [ingest, ingestInline, worker, reaper, ops, relay],
  read_model: [worker],
  case_core: [worker],
  public: [ingestInline, worker],
};
