/**
 * The benchmarks' databases on one server: each created (from a template, or migrated with
 * the declared consumers' roles and their local logins), and dropped.
 */
import postgres from 'postgres';
import { CONSUMERS } from '../functions/consumers';
import { provisionConsumerRoles } from '../functions/inbox/consumer-roles';
import { TYPES, type Sql } from '../functions/lib/db';
import { migrate } from '../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../functions/lib/migration-files';
import { prepareRoleLogins } from '../tools/database-roles';
import { withDatabase } from '../tools/database-url';

export interface BenchDatabase {
  name: string;
  url: string;
  /** The owner's client. */
  sql: Sql;
}

/** Create `name` on the server of `admin` (`serverUrl`), from `template` or migrated. */
export async function createBenchDatabase(admin: postgres.Sql, serverUrl: string, name: string, template?: string): Promise<BenchDatabase> {
  await admin.unsafe(`create database "${name}"${template ? ` template "${template}"` : ''}`);
  const url = withDatabase(serverUrl, name);
  const sql = postgres(url, { max: 4, onnotice: () => {}, types: TYPES }) as unknown as Sql;
  if (template === undefined) {
    await migrate(sql, await loadMigrations(MIGRATIONS_DIR));
    await provisionConsumerRoles(sql, CONSUMERS);
    await prepareRoleLogins(admin as unknown as Sql, serverUrl);
  }
  return { name, url, sql };
}

export async function dropBenchDatabase(admin: postgres.Sql, db: BenchDatabase): Promise<void> {
  await db.sql.end({ timeout: 5 });
  await admin.unsafe(`drop database if exists "${db.name}" with (force)`);
}
