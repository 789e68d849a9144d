/**
 * The consumers' own database roles (migrations/0130_consumer_roles.sql), provisioned
 * for the declared consumers by the migration step that follows the SQL files: in the
 * deploy-time migration function, `npm run migrate`, the local run and the tests.
 *
 * For each consumer, `inbox_ingest_<consumer>` and `inbox_worker_<consumer>`, and for one
 * that emits events `inbox_relay_<consumer>` (migrations/0160_relay_per_consumer.sql): created, or
 * re-enabled, as members of their kind's role (refused when the role exists with more
 * than LOGIN), mapped to the consumer for the row-level security policies, and granted
 * exactly the tables the declaration names (`tables`; the relay's role none, its handlers
 * never run there): everything else those roles held
 * outside the inbox's own schema is revoked. A consumer no longer declared has its roles
 * retired: NOLOGIN, and policies that match none of its rows.
 *
 * Then every role a function logs in as, and the migration role, gets its session settings
 * (role-settings.ts).
 *
 * One transaction: a deploy whose declarations do not fit (two consumers mapping to one
 * role, a table that does not exist) changes nothing and fails the deployment.
 */
import type { Sql, TransactionSql } from '../lib/db';
import { consumerRolesOf, type ConsumerRole, type ConsumerRoleDeclaration, type TablePrivileges } from '../lib/database-roles';
import { keepRoleSettings } from './role-settings';

export class ConsumerRoleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConsumerRoleError';
  }
}

export interface ProvisionResult {
  /** The consumer roles of the declarations, as provisioned. */
  roles: ConsumerRole[];
  /** Roles of consumers no longer declared, retired by this run. */
  retired: string[];
}

/** The schema that holds the inbox's shared tables: its privileges are the kind roles', not a consumer's. */
const INBOX_SCHEMA = 'integration';
const PRIVILEGES = ['select', 'insert', 'update', 'delete'] as const;

export async function provisionConsumerRoles(sql: Sql, consumers: readonly ConsumerRoleDeclaration[]): Promise<ProvisionResult> {
  const roles = consumerRolesOf(consumers);
  const seen = new Map<string, string>();
  for (const r of roles) {
    const other = seen.get(r.role);
    if (other !== undefined && other !== r.consumerName) {
      throw new ConsumerRoleError(`consumers "${other}" and "${r.consumerName}" map to one database role, ${r.role}: rename one`);
    }
    seen.set(r.role, r.consumerName);
  }
  return sql.begin(async (tx) => {
    // Server-wide roles, per-database grants: serialize this database's runs (two deploys
    // racing) on a table no function's role may lock, unlike an advisory key anyone may take.
    await tx`lock table integration.consumer_role in share row exclusive mode`;
    for (const r of roles) {
      await tx`select integration.provision_consumer_role(${r.role}, ${r.consumerName}, ${r.kind}, ${r.groups}::name[])`;
      const consumer = consumers.find((c) => c.name === r.consumerName)!;
      // An inline consumer's handlers run in its ingest too; a deferred consumer's ingest runs none.
      const runsHandlers = r.kind === 'worker' || (r.kind === 'ingest' && consumer.mode === 'inline');
      const tables = runsHandlers ? (consumer.tables ?? {}) : {};
      await grantExactly(tx, r.role, tables);
    }
    const retired = await tx<{ role: string }[]>`select integration.retire_consumer_roles(${roles.map((r) => r.role)}::name[]) as role`;
    for (const { role } of retired) await grantExactly(tx, role, {});
    await keepRoleSettings(tx, consumers);
    return { roles: roles.map((r) => r.role), retired: retired.map((r) => r.role) };
  });
}

/** Revoke whatever `role` holds outside the inbox's schema, then grant `tables` and their schemas' USAGE. */
async function grantExactly(tx: TransactionSql, role: string, tables: Readonly<Record<string, TablePrivileges>>): Promise<void> {
  const schemas = await tx<{ name: string }[]>`
    select nspname as name from pg_namespace
    where nspname <> ${INBOX_SCHEMA} and nspname not like 'pg\\_%' and nspname <> 'information_schema'`;
  for (const { name } of schemas) {
    // Revoking a table's privileges revokes its columns' too.
    await tx`revoke all on all tables in schema ${tx(name)} from ${tx(role)}`;
    await tx`revoke usage on schema ${tx(name)} from ${tx(role)}`;
  }
  for (const [table, privileges] of Object.entries(tables)) {
    const [schema] = table.split('.');
    if (schema === undefined || !table.includes('.') || schema === INBOX_SCHEMA) {
      throw new ConsumerRoleError(`table "${table}": name a consumer's own table as schema.table, outside ${INBOX_SCHEMA}`);
    }
    const [found] = await tx<{ ok: boolean }[]>`select to_regclass(${table}) is not null as ok`;
    if (!found!.ok) throw new ConsumerRoleError(`table "${table}" named by a consumer declaration does not exist`);
    await tx`grant usage on schema ${tx(schema)} to ${tx(role)}`;
    for (const privilege of PRIVILEGES) {
      const columns = privileges[privilege];
      if (columns === undefined) continue;
      const what = tx.unsafe(privilege);
      if (columns === true) await tx`grant ${what} on table ${tx(table)} to ${tx(role)}`;
      else await tx`grant ${what} (${tx(columns as string[])}) on table ${tx(table)} to ${tx(role)}`;
    }
  }
}
