/**
 * `npm run migrate`: apply pending migrations to DATABASE_URL, then provision the declared
 * consumers' roles and the operators' named in OPERATORS. A database a later release migrated is left as it is (exit 0).
 */
import { CONSUMERS } from '../functions/consumers/index';
import { provisionConsumerRoles } from '../functions/inbox/consumer-roles';
import { provisionOperatorRoles } from '../functions/inbox/operator-roles';
import { parseConfig } from '../functions/lib/config';
import { createSql } from '../functions/lib/db';
import { migrate } from '../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../functions/lib/migration-files';

const config = parseConfig(process.env);
const sql = await createSql({ ...config.database, poolMax: 2 });
try {
  const result = await migrate(sql, await loadMigrations(MIGRATIONS_DIR), { log: (m) => console.log(m) });
  console.log(`migrations: ${result.applied.length} applied, ${result.alreadyApplied} already applied`);
  if (result.newer.length === 0) {
    const roles = await provisionConsumerRoles(sql, CONSUMERS);
    console.log(`consumer roles: ${roles.roles.join(', ')}${roles.retired.length > 0 ? `; retired ${roles.retired.join(', ')}` : ''}`);
    const operators = await provisionOperatorRoles(sql, config.operators);
    if (operators.roles.length + operators.retired.length > 0) {
      console.log(
        `operator roles: ${operators.roles.join(', ')}${operators.retired.length > 0 ? `; retired ${operators.retired.join(', ')}` : ''}`,
      );
    }
  }
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  await sql.end({ timeout: 5 });
}
