/** `npm run migrate`: apply pending migrations to DATABASE_URL, then provision the declared consumers' roles. */
import { CONSUMERS } from '../functions/consumers/index';
import { provisionConsumerRoles } from '../functions/inbox/consumer-roles';
import { parseConfig } from '../functions/lib/config';
import { createSql } from '../functions/lib/db';
import { loadMigrations, migrate, MIGRATIONS_DIR } from '../functions/lib/migrate';

const config = parseConfig(process.env);
const sql = await createSql({ ...config.database, poolMax: 1 });
try {
  const result = await migrate(sql, await loadMigrations(MIGRATIONS_DIR), (m) => console.log(m));
  console.log(`migrations: ${result.applied.length} applied, ${result.alreadyApplied} already applied`);
  const roles = await provisionConsumerRoles(sql, CONSUMERS);
  console.log(`consumer roles: ${roles.roles.join(', ')}${roles.retired.length > 0 ? `; retired ${roles.retired.join(', ')}` : ''}`);
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  await sql.end({ timeout: 5 });
}
