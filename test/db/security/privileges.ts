/**
 * What each function's database role may do: the one matrix that the migrations' grants
 * (migrations/0046_grants.sql and later) and the consumer roles' step
 * (functions/inbox/consumer-roles.ts) are held to by privileges.test.ts. Effective
 * privileges, as PostgreSQL answers has_*_privilege(): inherited ones included (the
 * inline ingest role is a member of inbox_ingest; each consumer's role is a member of its
 * kind's), PUBLIC's included.
 *
 * Adding a table, sequence or function in a migration: grant what each role's code uses
 * in that migration, and add the object here. An object missing from this file fails the
 * test, as does any privilege the database has and this file does not (or the reverse).
 * A consumer's domain tables, its roles' memberships and the schemas they use come from the
 * declarations (CONSUMER_TABLES below): its worker role gets what its `tables` say; an inline
 * consumer's ingest role gets the same; no other role gets anything. So adding a consumer
 * changes nothing here; privileges.test.ts holds the shipped consumers' grants to what
 * their handlers need, literally. Which rows of the shared tables a consumer's role
 * reaches is row-level security's (rls.test.ts).
 */
import { CONSUMERS } from '../../../functions/consumers/index';
import {
  consumerRolesOf,
  DatabaseRoles,
  KIND_ROLES,
  type ConsumerRoleKind,
  type DatabaseRole,
  type TablePrivileges,
} from '../../../functions/lib/database-roles';

const { ingest, ingestInline, worker, reaper, ops, relay } = DatabaseRoles;

/** The declared consumers' roles of one kind. */
export function rolesOfKind(kind: ConsumerRoleKind): DatabaseRole[] {
  return consumerRolesOf(CONSUMERS)
    .filter((r) => r.kind === kind)
    .map((r) => r.role);
}

/** Every role the matrix covers: the kind roles and each declared consumer's. */
export const ROLES: readonly DatabaseRole[] = [...KIND_ROLES, ...consumerRolesOf(CONSUMERS).map((r) => r.role)];

/** The groups each role is a member of (directly), as migrations 0045 and 0130 make them: a consumer's role, its kind's. */
export const MEMBER_OF: Partial<Record<DatabaseRole, readonly DatabaseRole[]>> = {
  [ingestInline]: [ingest],
  ...Object.fromEntries(consumerRolesOf(CONSUMERS).map((r) => [r.role, r.groups])),
};

/** The roles that can log in: the cross-consumer functions' and the consumers' own; the kinds of ingest, worker and relay are groups. */
export const LOGIN: readonly DatabaseRole[] = ROLES.filter((r) => r !== ingest && r !== ingestInline && r !== worker && r !== relay);

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
  'status',
  'attempt_count',
  'next_attempt_at',
  'processed_at',
  'quarantined_at',
  'error_code',
  'error_message',
  'error_detail',
  'locked_by',
  'locked_at',
  'lease_expires_at',
  'updated_at',
] as const;

/** The raw poison table's unique key: the ON CONFLICT target of record-poison.ts. */
const POISON_OFFSET_KEY = ['consumer_name', 'topic_name', 'partition_no', 'offset_no'] as const;

/**
 * The consumers' own tables: each declaration's `tables`, granted to its worker role and,
 * for an inline consumer, to its ingest role (whose handlers run there too).
 */
export function consumerTables(consumers: typeof CONSUMERS): Record<string, Partial<Record<DatabaseRole, TableGrant>>> {
  const tables: Record<string, Partial<Record<DatabaseRole, TableGrant>>> = {};
  for (const r of consumerRolesOf(consumers)) {
    const consumer = consumers.find((c) => c.name === r.consumerName)!;
    if (r.kind === 'relay' || (r.kind === 'ingest' && consumer.mode !== 'inline')) continue;
    for (const [table, privileges] of Object.entries(consumer.tables ?? {})) {
      (tables[table] ??= {})[r.role] = grantOf(privileges);
    }
  }
  return tables;
}

function grantOf(privileges: TablePrivileges): TableGrant {
  return Object.fromEntries(Object.entries(privileges).filter(([, v]) => v !== undefined)) as TableGrant;
}

export const CONSUMER_TABLES = consumerTables(CONSUMERS);

/** Tables and views, schema-qualified; a role not listed has no privilege at all. */
export const TABLES: Record<string, Partial<Record<DatabaseRole, TableGrant>>> = {
  ...CONSUMER_TABLES,
  'integration.consumer_inbox': {
    // SELECT on the columns of its ON CONFLICT target only: it can tell an event id is stored, not read an event.
    [ingest]: { insert: true, select: ['consumer_name', 'event_id'] },
    [ingestInline]: { insert: true, select: true, update: INBOX_LEASE_OUTCOME },
    [worker]: { select: true, update: INBOX_LEASE_OUTCOME },
    // Purging sets payload_purged_at; the purged form itself is the trigger's (0130), so no payload or headers here.
    [reaper]: {
      select: true,
      delete: true,
      update: [
        'status',
        'next_attempt_at',
        'quarantined_at',
        'error_code',
        'error_message',
        'error_detail',
        'locked_by',
        'locked_at',
        'lease_expires_at',
        'updated_at',
        'payload_purged_at',
      ],
    },
    [ops]: {
      select: true,
      insert: true,
      update: [
        'status',
        'attempt_count',
        'next_attempt_at',
        'processed_at',
        'quarantined_at',
        'error_code',
        'error_message',
        'error_detail',
        'locked_by',
        'locked_at',
        'lease_expires_at',
        'updated_at',
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
  // Which consumer each consumer role serves (0130): read through consumer_of_role() only.
  'integration.consumer_role': {},
  // The operators' own roles (0203), and an operator's changes until its transaction commits: the owner's and its triggers' only.
  'integration.operator_role': {},
  'integration.operator_change': {},
  // The migration runner's bookkeeping, and the ledger the runners of 2026-12-02 and earlier read: no function reads them.
  'public.inbox_schema_history': {},
  'public.inbox_schema_migrations': {},
};

/** Sequences (identity and serial columns), schema-qualified: the roles with USAGE (nextval). */
// A consumer table's identity sequence is held to no grant by privileges.test.ts (an INSERT
// takes the next value without one), wherever a consumer's migration adds one.
export const SEQUENCES: Record<string, Partial<Record<DatabaseRole, readonly ('USAGE' | 'SELECT' | 'UPDATE')[]>>> = {
  // Identity columns' sequences: an INSERT takes the next value without a grant on them.
  'integration.outbox_outbox_seq_seq': {},
  'integration.operator_change_change_id_seq': {},
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
  // The row-level security policies' lookup (0130): the consumer kinds' roles call it.
  'integration.consumer_of_role(name)': [ingest, ingestInline, worker, relay, ...consumerRolesOf(CONSUMERS).map((r) => r.role)],
  // Asked by the inbox's own-rows triggers (0130) of whoever writes.
  'integration.is_consumer_role(name)': [...KIND_ROLES, ...consumerRolesOf(CONSUMERS).map((r) => r.role)],
  // The inbox's own-rows check and purged form (triggers), the migration step's helpers (0130): no role's.
  'integration.own_consumer_rows_only()': [],
  'integration.guard_consumer_writes(regclass)': [],
  'integration.consumer_inbox_purged_form()': [],
  'integration.guard_consumer_rows(regclass)': [],
  'integration.provision_consumer_role(name,text,text,name[])': [],
  'integration.retire_consumer_roles(name[])': [],
  // The migration step's keeper of the roles' session settings (0180): the owner's alone.
  'integration.keep_role_settings(name,boolean,text[])': [],
  // The deletes a worker's or relay's statements make, for its own consumer's rows only,
  // instead of a table-level DELETE that would let it lock the table (0200).
  'integration.deletable_consumer(text)': [],
  'integration.delete_claimed_lanes(text,tid[])': [worker, ...rolesOfKind('worker')],
  'integration.delete_claimed_outbox_lanes(text,tid[])': [relay, ...rolesOfKind('relay')],
  'integration.delete_idle_outbox_lanes(text[],text[],text[])': [relay, ...rolesOfKind('relay')],
  'integration.delete_published_outbox(text,integer,integer)': [relay, ...rolesOfKind('relay')],
  // The reaper ends consumer roles' sessions past the bound (0201).
  'integration.end_overrunning_sessions(double precision)': [reaper],
  // The operator audit kept by the database (0203): its triggers, and the migration step's helpers.
  'integration.is_operator_session()': [],
  'integration.operator_audit_recorded()': [],
  'integration.operator_changes()': [],
  'integration.operator_change_audited()': [],
  'integration.provision_operator_role(name)': [],
  'integration.retire_operator_roles(name[])': [],
};

/** The schemas of the consumers' tables, each with the roles granted a table in it. */
function consumerSchemas(): Record<string, DatabaseRole[]> {
  const schemas: Record<string, DatabaseRole[]> = {};
  for (const [table, grants] of Object.entries(CONSUMER_TABLES)) {
    const roles = (schemas[table.split('.')[0]!] ??= []);
    for (const role of Object.keys(grants) as DatabaseRole[]) if (!roles.includes(role)) roles.push(role);
  }
  return schemas;
}

/**
 * Schemas: the roles with USAGE. CREATE belongs to the owner alone. `public` is listed even
 * when no consumer uses it (the migrations revoke PUBLIC's usage of it).
 */
export const SCHEMAS: Record<string, readonly DatabaseRole[]> = {
  public: [],
  ...consumerSchemas(),
  integration: [ingest, ingestInline, worker, reaper, ops, relay, ...consumerRolesOf(CONSUMERS).map((r) => r.role)],
};

function mergeColumns(a: Columns | undefined, b: Columns | undefined): Columns | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  if (a === true || b === true) return true;
  return [...new Set([...a, ...b])];
}

/**
 * What `role` holds on `table` in effect: its own entry and, through its memberships,
 * its groups' (a consumer role's inbox rights are its kind's).
 */
export function effectiveGrant(table: string, role: DatabaseRole): TableGrant {
  const grant: TableGrant = { ...(TABLES[table]?.[role] ?? {}) };
  for (const group of MEMBER_OF[role] ?? []) {
    const inherited = effectiveGrant(table, group);
    for (const k of ['select', 'insert', 'update', 'references'] as const) {
      const merged = mergeColumns(grant[k], inherited[k]);
      if (merged !== undefined) grant[k] = merged;
    }
    for (const k of ['delete', 'truncate', 'trigger'] as const) if (inherited[k]) grant[k] = true;
  }
  return grant;
}
