/**
 * The database roles the functions connect as (migrations/0045 creates the kind roles,
 * 0046 and later grant what each function's code uses; migrations/0130 makes the consumer
 * kinds groups of one login role per consumer, and migrations/0160_relay_per_consumer.sql
 * the relay, one role per emitting consumer). The CDK app reads these names for the
 * functions' `rds-db:connect` permissions and DB_IAM_USER; the local run and the tests
 * connect each function as its role, so a missing grant fails a test, not a deploy.
 */

import type { SessionKind } from './session-settings';

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
export interface ConsumerRoleDeclaration extends RoleConsumer {
  tables?: Readonly<Record<string, TablePrivileges>>;
}

/** What decides a consumer's roles: its name, its mode, and whether it emits events (a relay role). */
export interface RoleConsumer {
  name: string;
  mode: Mode;
  /** The events it emits, by name (functions/framework/types.ts): a relay role when there is one. */
  emits?: Readonly<Record<string, unknown>>;
  /** Or, as a stage's config says it (cdk/config.ts), the topics it emits to. */
  outboxTopics?: readonly string[];
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
  /** Every relay function's group: claims, publishes and purges an emitting consumer's outbox rows. */
  relay: 'inbox_relay',
} as const;

/** A kind role: a group for ingest, worker and relay, a login role for the cross-consumer functions. */
export type KindRole = (typeof DatabaseRoles)[keyof typeof DatabaseRoles];

/** A consumer's own login role: `<kind role>_<consumer name with '-' as '_'>`. */
export type ConsumerRole = `${typeof DatabaseRoles.ingest | typeof DatabaseRoles.worker | typeof DatabaseRoles.relay}_${string}`;

/** Any role a function, an operator or a test connects as. */
export type DatabaseRole = KindRole | ConsumerRole | OperatorRole;

export const KIND_ROLES: readonly KindRole[] = Object.values(DatabaseRoles);

/** The kind roles the functions log in as: the cross-consumer ones. Ingest, worker and relay log in as their consumer's role. */
export const LOGIN_KIND_ROLES: readonly KindRole[] = [DatabaseRoles.reaper, DatabaseRoles.ops];

/** The functions that have a role per consumer (the relay: per consumer that emits). */
export type ConsumerRoleKind = 'ingest' | 'worker' | 'relay';

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

/** The role of an emitting consumer's relay function. */
export function relayRoleOf(consumer: { name: string }): ConsumerRole {
  return consumerRole('relay', consumer.name);
}

/** Whether the consumer emits events, so has a relay (as emitsEvents in functions/framework/types.ts). */
export function hasRelay(consumer: Pick<RoleConsumer, 'emits' | 'outboxTopics'>): boolean {
  return Object.keys(consumer.emits ?? {}).length > 0 || (consumer.outboxTopics ?? []).length > 0;
}

/** The groups a consumer's role of `kind` is a member of: its kind's, and inline ingest's for an inline consumer. */
export function groupsOf(kind: ConsumerRoleKind, consumer: { mode: Mode }): KindRole[] {
  if (kind === 'worker') return [DatabaseRoles.worker];
  if (kind === 'relay') return [DatabaseRoles.relay];
  return consumer.mode === 'inline' ? [DatabaseRoles.ingestInline] : [DatabaseRoles.ingest];
}

/** Every consumer role of `consumers`, with its kind and consumer: ingest and worker for each, relay for those that emit. */
export function consumerRolesOf(
  consumers: readonly RoleConsumer[],
): { role: ConsumerRole; kind: ConsumerRoleKind; consumerName: string; groups: KindRole[] }[] {
  return consumers.flatMap((c) =>
    (hasRelay(c) ? (['ingest', 'worker', 'relay'] as const) : (['ingest', 'worker'] as const)).map((kind) => ({
      role: consumerRole(kind, c.name),
      kind,
      consumerName: c.name,
      groups: groupsOf(kind, c),
    })),
  );
}

/** An operator's name in the stage's config: their database role is `inbox_ops_<name>`. */
export const OPERATOR_NAME = /^[a-z][a-z0-9_]{0,39}$/;

/** A person's own database role for the ops CLI: a member of inbox_ops (migrations/0203). */
export type OperatorRole = `${typeof DatabaseRoles.ops}_${string}`;

/** The database role of the operator `name` (a-z, 0-9 and _, starting with a letter, 40 at most). */
export function operatorRole(name: string): OperatorRole {
  if (!OPERATOR_NAME.test(name)) {
    throw new Error(`operator "${name}": a name is 1-40 of a-z, 0-9 and _, starting with a letter`);
  }
  return `${DatabaseRoles.ops}_${name}`;
}

/** Every role a function logs in as, for these consumers: the cross-consumer kinds' and each consumer's. */
export function runtimeRoles(consumers: readonly RoleConsumer[]): DatabaseRole[] {
  return [...LOGIN_KIND_ROLES, ...consumerRolesOf(consumers).map((r) => r.role)];
}

/** The function kind a role serves, for its session settings (session-settings.ts). */
export function sessionKindOf(role: DatabaseRole): SessionKind {
  if (role === DatabaseRoles.reaper) return 'reaper';
  if (role === DatabaseRoles.ops) return 'ops';
  for (const kind of ['ingest', 'worker', 'relay'] as const) {
    if (role === DatabaseRoles[kind] || role.startsWith(`${DatabaseRoles[kind]}_`)) return kind;
  }
  throw new Error(`${role} is not a role a function logs in as`);
}
