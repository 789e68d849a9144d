/**
 * The deploy-time migration function, invoked by the CDK trigger (cdk/constructs/migrations.ts).
 * It runs the project's one runner on the migrations/ folder that the bundling step copied
 * next to this bundle. Throwing fails the trigger, and with it the deployment. The one
 * function that uses the master credentials: it creates and owns every object, and the
 * functions' roles (migrations/0045_database_roles.sql); after the files, the declared
 * consumers' own roles and their tables' grants (functions/inbox/consumer-roles.ts), and
 * the stage's operators' roles (OPERATORS, functions/inbox/operator-roles.ts). The
 * consumers are those of the manifest its bundle carries (functions/framework/manifest.ts):
 * the one function that holds the master secret loads no team's code.
 *
 * During a CloudFormation rollback the trigger runs this release's function against the
 * schema a later release left: the runner finds the database ahead and changes nothing,
 * and the consumers' roles stay as the later release provisioned them (docs/migrations.md).
 */
import type { Context } from 'aws-lambda';
import { fileURLToPath } from 'node:url';
import type { ConsumerManifest } from '../framework/manifest';
import { provisionConsumerRoles } from '../inbox/consumer-roles';
import { provisionOperatorRoles } from '../inbox/operator-roles';
import { loadConfig } from '../lib/config';
import { createSql } from '../lib/db';
import { migrate, type MigrateResult } from '../lib/migrate';
import { loadMigrations } from '../lib/migration-files';
import { createObservability } from '../lib/observability';

// Resolved against the bundle (index.mjs), not the source tree: see MIGRATIONS_DIR in migration-files.ts.
const BUNDLED_MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
// What the step keeps for itself after its slowest statement: reporting, provisioning, closing.
const RESERVED_MS = 30_000;

export type MigrateLambda = (event?: unknown, context?: Pick<Context, 'getRemainingTimeInMillis'>) => Promise<MigrateResult>;

/**
 * The Lambda handler of the migration function for the manifest's consumers, configured
 * from the environment. The master secret is read on every invocation, and the connection
 * closed at its end, rather than once per container: the secret rotates (automatic
 * rotation), and a warm container kept from the last deploy must not try yesterday's password.
 */
export function migrateLambda(consumers: ConsumerManifest): MigrateLambda {
  const config = loadConfig();
  const { logger } = createObservability(config, 'migrate');
  return async function handler(_event, context) {
    // Two: a file outside a transaction runs on one while the other holds the runners' lock.
    const sql = await createSql({ ...config.database, poolMax: 2 });
    try {
      const migrations = await loadMigrations(BUNDLED_MIGRATIONS_DIR);
      const remaining = context?.getRemainingTimeInMillis();
      logger.info('migrating', { files: migrations.length });
      const result = await migrate(sql, migrations, {
        log: (message) => logger.info(message),
        // A statement that cannot finish in the invocation's time fails with its own error, not a timeout of the function.
        ...(remaining === undefined ? {} : { statementTimeoutMs: Math.max(remaining - RESERVED_MS, 1_000) }),
      });
      if (result.newer.length > 0) {
        logger.info('migrated', { applied: 0, alreadyApplied: result.alreadyApplied, newer: result.newer });
        return result;
      }
      const roles = await provisionConsumerRoles(sql, consumers);
      const operators = await provisionOperatorRoles(sql, config.operators);
      logger.info('migrated', {
        applied: result.applied.length,
        alreadyApplied: result.alreadyApplied,
        consumerRoles: roles.roles.length,
        retiredRoles: roles.retired,
        operatorRoles: operators.roles,
        retiredOperatorRoles: operators.retired,
      });
      return result;
    } finally {
      await sql.end({ timeout: 5 });
    }
  };
}
