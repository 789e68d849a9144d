/**
 * A release's functions as the upgrade tests run them (test/db/upgrade/): each bundled as it
 * ships, invoked in its own process on one database, as its own role (the migration
 * function as the owner), configured by its environment only.
 */
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { inject } from 'vitest';
import { getConsumer } from '../../functions/consumers';
import { DatabaseRoles, ingestRoleOf, relayRoleOf, workerRoleOf, type DatabaseRole } from '../../functions/lib/database-roles';
import { roleUrl } from '../../tools/database-roles';
import { withDatabase } from '../../tools/database-url';
import { bundleOf, invokeBundle, relayWithoutBrokers, resultOf, type FunctionName } from './bundles';

/** The role `fn` logs in as (a consumer's own for ingest, worker and relay). */
export function roleOf(fn: Exclude<FunctionName, 'migrate'>, consumer?: string): DatabaseRole {
  if (fn === 'ingest') return ingestRoleOf(getConsumer(consumer!));
  if (fn === 'worker') return workerRoleOf(getConsumer(consumer!));
  if (fn === 'relay') return relayRoleOf(getConsumer(consumer!));
  return DatabaseRoles[fn];
}

export interface ReleaseDatabase {
  adminUrl: string;
  name: string;
}

/**
 * An empty database of the test server for an upgrade test (named after the run's template
 * and `suffix`), its owner's client, and its removal.
 */
export async function createReleaseDatabase(suffix: string): Promise<ReleaseDatabase & { owner: postgres.Sql; drop: () => Promise<void> }> {
  const adminUrl = inject('dbAdminUrl');
  const name = `${inject('dbTemplate').replace('inbox_tpl_', 'inbox_t_')}_${suffix}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  await admin.end();
  const owner = postgres(withDatabase(adminUrl, name), { max: 2, onnotice: () => {} });
  return {
    adminUrl,
    name,
    owner,
    async drop() {
      await owner.end();
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists "${name}" with (force)`);
      await a.end();
    },
  };
}

/**
 * Invoke the bundled `fn` of the release whose bundles are in `bundles`, as its own role;
 * `label` names the release in a failure. Resolves to the handler's result.
 */
export async function invokeRelease(
  label: string,
  bundles: string,
  db: ReleaseDatabase,
  fn: FunctionName,
  event: unknown,
  options: { consumer?: string; env?: Record<string, string> } = {},
): Promise<any> {
  const { consumer } = options;
  const url = fn === 'migrate' ? withDatabase(db.adminUrl, db.name) : roleUrl(db.adminUrl, roleOf(fn, consumer), db.name);
  const env: Record<string, string> = {
    DATABASE_URL: url,
    LOG_LEVEL: 'ERROR',
    POWERTOOLS_METRICS_DISABLED: 'true',
    // The scheduled worker stops at its first empty claim rather than staying awake.
    WORKER_IDLE_MS: '0',
    ...(consumer === undefined ? {} : { CONSUMER_NAME: consumer }),
    ...(fn === 'relay' ? await relayWithoutBrokers() : {}),
    ...options.env,
  };
  const output = await invokeBundle(bundleOf(bundles, fn, consumer), event, env, { requestId: `${label}-${fn}-${randomUUID()}` }).catch(
    (error: { stdout?: string; stderr?: string }) => {
      throw new Error(
        `the ${label} release's ${fn}${consumer === undefined ? '' : ` (${consumer})`} failed:\n${error.stdout}\n${error.stderr}`,
      );
    },
  );
  return resultOf(output);
}
