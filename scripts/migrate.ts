/** `npm run migrate`: apply pending migrations to DATABASE_URL. */
import { parseConfig } from '../functions/lib/config';
import { createSql } from '../functions/lib/db';
import { loadMigrations, migrate, MIGRATIONS_DIR } from '../functions/lib/migrate';

const config = parseConfig(process.env);
const sql = await createSql({ ...config.database, poolMax: 1 });
try {
  const result = await migrate(sql, await loadMigrations(MIGRATIONS_DIR), (m) => console.log(m));
  console.log(`migrations: ${result.applied.length} applied, ${result.alreadyApplied} already applied`);
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
} finally {
  await sql.end({ timeout: 5 });
}
