/**
 * The database roles the functions connect as (migrations/0045 creates the kind roles,
 * 0046 and later grant what each function's code uses; migrations/0130 makes the consumer
 * kinds groups of one login role per consumer). The CDK app reads these names for the
 * functions' `rds-db:connect` permissions and DB_IAM_USER; the local run and the tests
 * connect each function as its role, so a missing grant fails a test, not a deploy.
 */

/** A consumer's mode, as its declaration says it (functions/framework/types.ts). */
type Mode = 'deferred' | 'inline';

/**
 * What a consumer's code does on one of its own tables (its declaration's `tables`): a
 * privilege on all columns (`true`) or on some.
 */
export interface TablePrivileges {
  select?: true | readonly string[];
  insert?: true | readonly string[];
  update?: true | readonly string[];
  delete?: true;
}

/** What the consumer roles' step reads of a declaration. */
export interface ConsumerRoleDeclaration {
  name: string;
  mode: Mode;
  tables?: Readonly<Record<string, TablePrivileges>>;
}

export const DatabaseRoles = {
  /** Every ingest function's group: stores inbox and poison rows. */
  ingest: 'inbox_ingest',
  /** An inline consumer's ingest group: a member of inbox_ingest that also finishes its rows. */
  ingestInline: 'inbox_ingest_inline',
  /** Every worker function's group. */
  worker: 'inbox_worker',
  reaper: 'inbox_reaper',
  ops: 'inbox_ops',
  /** The outbox relay: claims, publishes and purges outbox rows. */
  relay: 'inbox_relay',
} as const;

/** A kind role: a group for ingest and worker, a login role for the cross-consumer functions. */
export type KindRole = (typeof DatabaseRoles)[keyof typeof DatabaseRoles];

/** A consumer's own login role: `<kind role>_<consumer name with '-' as '_'>`. */
export type ConsumerRole = `${typeof DatabaseRoles.ingest | typeof DatabaseRoles.worker}_${string}`;

/** Any role a function or a test connects as. */
export type DatabaseRole = KindRole | ConsumerRole;

export const KIND_ROLES: readonly KindRole[] = Object.values(DatabaseRoles);

/** The kind roles the functions log in as: the cross-consumer ones. Ingest and worker log in as their consumer's role. */
export const LOGIN_KIND_ROLES: readonly KindRole[] = [DatabaseRoles.reaper, DatabaseRoles.ops, DatabaseRoles.relay];

/** The functions that have a role per consumer. */
export type ConsumerRoleKind = 'ingest' | 'worker';

/** PostgreSQL's limit on a name (NAMEDATALEN - 1). */
const MAX_ROLE_NAME = 63;

/** The login role of `consumer`'s function of `kind`. Throws for a name PostgreSQL would truncate. */
export function consumerRole(kind: ConsumerRoleKind, consumerName: string): ConsumerRole {
  const role = `${DatabaseRoles[kind]}_${consumerName.replace(/-/g, '_')}` as const;
  if (!/^[a-z_][a-z0-9_]*$/.test(role) || role.length > MAX_ROLE_NAME) {
    throw new Error(
      `consumer "${consumerName}" gives the database role "${role}": a role name is at most ${MAX_ROLE_NAME} of a-z, 0-9 and _`,
    );
  }
  return role;
}

/** The role of a consumer's ingest function. */
export function ingestRoleOf(consumer: { name: string }): ConsumerRole {
  return consumerRole('ingest', consumer.name);
}

/** The role of a consumer's worker function. */
export function workerRoleOf(consumer: { name: string }): ConsumerRole {
  return consumerRole('worker', consumer.name);
}

/** The groups a consumer's role of `kind` is a member of: its kind's, and inline ingest's for an inline consumer. */
export function groupsOf(kind: ConsumerRoleKind, consumer: { mode: Mode }): KindRole[] {
  if (kind === 'worker') return [DatabaseRoles.worker];
  return consumer.mode === 'inline' ? [DatabaseRoles.ingestInline] : [DatabaseRoles.ingest];
}

/** Every consumer role of `consumers`, with its kind and consumer. */
export function consumerRolesOf(
  consumers: readonly { name: string; mode: Mode }[],
): { role: ConsumerRole; kind: ConsumerRoleKind; consumerName: string; groups: KindRole[] }[] {
  return consumers.flatMap((c) =>
    (['ingest', 'worker'] as const).map((kind) => ({
      role: consumerRole(kind, c.name),
      kind,
      consumerName: c.name,
      groups: groupsOf(kind, c),
    })),
  );
}

/** Every role a function logs in as, for these consumers: the cross-consumer kinds' and each consumer's. */
export function runtimeRoles(consumers: readonly { name: string; mode: Mode }[]): DatabaseRole[] {
  return [...LOGIN_KIND_ROLES, ...consumerRolesOf(consumers).map((r) => r.role)];
}
