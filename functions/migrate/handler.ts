/**
 * The deploy-time migration function, invoked by the CDK trigger (cdk/constructs/migrations.ts).
 * It runs the project's one runner on the migrations/ folder that the bundling step copied
 * next to this bundle. Throwing fails the trigger, and with it the deployment.
 */
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../lib/config';
import { getSql } from '../lib/db';
import { loadMigrations, migrate, type MigrateResult } from '../lib/migrate';
import { createObservability } from '../lib/observability';

const config = loadConfig();
const { logger } = createObservability(config, 'migrate');
// Resolved against the bundle (index.mjs), not the source tree: see MIGRATIONS_DIR in migrate.ts.
const BUNDLED_MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

export async function handler(): Promise<MigrateResult> {
  const sql = await getSql(config.database);
  const migrations = await loadMigrations(BUNDLED_MIGRATIONS_DIR);
  logger.info('migrating', { files: migrations.length });
  const result = await migrate(sql, migrations, (message) => logger.info(message));
  logger.info('migrated', { applied: result.applied.length, alreadyApplied: result.alreadyApplied });
  return result;
}
