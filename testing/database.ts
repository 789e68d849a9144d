/**
 * Per-test-file databases cloned from the migrated template made by the global setup.
 *
 *   const db = await useTestDatabase();   // in a describe / at file top level
 *   db.sql`...`, db.url                     // the owner's client (arrange, assert) and its URL
 *   db.as(workerRoleOf(caseProjection))     // a client as a function's own role: the code under test
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, inject, vi } from 'vitest';
import { TYPES, type Sql } from '../functions/lib/db';
import type { DatabaseRole } from '../functions/lib/database-roles';
import { withDatabase } from '../tools/database-url';
import { prepareRoleLogins, roleUrl } from '../tools/database-roles';
import type { ConsumerDeclaration } from '../functions/framework/types';
import { provisionConsumerRoles } from '../functions/inbox/consumer-roles';

export interface TestDatabase {
  name: string;
  /** The owner's (the migration runner's) URL and client: for arranging and asserting. */
  url: string;
  sql: Sql;
  /**
   * A further client on the same database (e.g. to simulate a second Lambda container),
   * as the owner or, with `role`, as a function's own database role.
   */
  client(options?: postgres.Options<{}> & { role?: DatabaseRole }): Sql;
  /** The client a function connects with: as its own role, so that a missing grant fails the test (one per role, kept). */
  as(role: DatabaseRole): Sql;
  /** The connection string of a function's role (for a function run in its own process). */
  urlAs(role: DatabaseRole): string;
  /**
   * Provision the roles of `consumers` in this database, as the migration step does for
   * the declared ones (a test's own consumer gets its roles this way), with their local logins.
   */
  provision(consumers: readonly ConsumerDeclaration[]): Promise<void>;
  drop(): Promise<void>;
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/**
 * Clone the migrated template (or `from`, another template). Named after the vitest main
 * process's pid (the global setup's), so the global teardown can drop leftovers of this run.
 */
export async function createTestDatabase(from?: string): Promise<TestDatabase> {
  const adminUrl = inject('dbAdminUrl');
  const migrated = inject('dbTemplate');
  const template = from ?? migrated;
  const runPid = migrated.split('_')[2];
  const name = `inbox_t_${runPid}_${randomBytes(6).toString('hex')}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    // CREATE DATABASE … TEMPLATE fails (55006) while another clone is reading the template.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.unsafe(`create database "${name}" template "${template}"`);
        break;
      } catch (error) {
        if ((error as { code?: string }).code !== '55006' || attempt >= 50) throw error;
        await sleep(50 + Math.random() * 100);
      }
    }
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const urlAs = (role: DatabaseRole) => roleUrl(adminUrl, role, name);
  const clients: postgres.Sql[] = [];
  const client = ({ role, ...options }: postgres.Options<{}> & { role?: DatabaseRole } = {}): Sql => {
    const c = postgres(role === undefined ? url : urlAs(role), { max: 10, onnotice: () => {}, types: TYPES, ...options });
    clients.push(c);
    return c as unknown as Sql;
  };
  const sql = client();
  const byRole = new Map<DatabaseRole, Sql>();
  const as = (role: DatabaseRole): Sql => {
    let c = byRole.get(role);
    if (c === undefined) byRole.set(role, (c = client({ role })));
    return c;
  };
  let dropped = false;
  const provision = async (consumers: readonly ConsumerDeclaration[]): Promise<void> => {
    const { roles } = await provisionConsumerRoles(sql, consumers);
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    try {
      await prepareRoleLogins(admin as unknown as Sql, adminUrl, roles);
    } finally {
      await admin.end();
    }
  };
  return {
    name,
    url,
    sql,
    client,
    as,
    urlAs,
    provision,
    async drop() {
      if (dropped) return;
      dropped = true;
      await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} });
      try {
        await a.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await a.end();
      }
    },
  };
}

/**
 * An empty database (no schema at all: PostgreSQL's own template0), for tests of the
 * migrations themselves. The caller drops it.
 */
export function emptyDatabase(): Promise<TestDatabase> {
  return createTestDatabase('template0');
}

/** Create a database for the current test file and drop it after the file's tests. */
export async function useTestDatabase(): Promise<TestDatabase> {
  const db = await createTestDatabase();
  afterAll(() => db.drop());
  return db;
}

/**
 * Run an assertion on the server's roles until it holds (at most 20 s). Roles belong to the
 * server, not to a test's database: another test file migrating an empty database of the
 * same server passes through migrations that gave the kind roles LOGIN before later ones
 * took it away, so for a moment the server shows that earlier state. A role that stays
 * wrong still fails the assertion.
 */
export async function settledRoles(assertion: () => Promise<void>): Promise<void> {
  await vi.waitFor(assertion, { timeout: 20_000, interval: 250 });
}
