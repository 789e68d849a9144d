/**
 * The global setup of a vitest project of database tests (this repository's `db`): starts
 * the database once per run, an embedded PostgreSQL or the server at TEST_DATABASE_URL, and
 * migrates a template database once (the roles of every declared consumer included); every
 * test file then clones its own database from it (./database.ts, used by ./index.ts).
 */
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { CONSUMERS } from '../functions/consumers/index';
import { provisionConsumerRoles } from '../functions/inbox/consumer-roles';
import { migrate } from '../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../functions/lib/migration-files';
import type { Sql } from '../functions/lib/db';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../tools/embedded-postgres';
import { withDatabase } from '../tools/database-url';
import { prepareRoleLogins } from '../tools/database-roles';

declare module 'vitest' {
  export interface ProvidedContext {
    dbAdminUrl: string;
    dbTemplate: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let embedded: EmbeddedDatabase | undefined;
  const external = process.env.TEST_DATABASE_URL;
  if (external === undefined || external === '') {
    embedded = await startEmbeddedPostgres();
  }
  const adminUrl = external || embedded!.url;
  const template = `inbox_tpl_${process.pid}_${Date.now().toString(36)}`;

  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${template}"`);
  const tpl = postgres(withDatabase(adminUrl, template), { max: 2, onnotice: () => {} });
  try {
    await migrate(tpl as unknown as Sql, await loadMigrations(MIGRATIONS_DIR));
    await provisionConsumerRoles(tpl as unknown as Sql, CONSUMERS);
  } finally {
    await tpl.end();
  }
  // The functions' roles (created by the migrations, server-wide) log in by password where the server needs one.
  await prepareRoleLogins(admin as unknown as Sql, adminUrl);

  project.provide('dbAdminUrl', adminUrl);
  project.provide('dbTemplate', template);

  return async () => {
    // Drop what this run created, even if a test file failed to clean up after itself.
    const leftovers = await admin<{ datname: string }[]>`
      select datname from pg_database where datname = ${template} or datname like ${`inbox_t_${process.pid}_%`}`;
    for (const { datname } of leftovers) {
      await admin.unsafe(`drop database if exists "${datname}" with (force)`);
    }
    await admin.end();
    await embedded?.stop();
  };
}
