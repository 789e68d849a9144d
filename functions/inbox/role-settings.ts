/**
 * The migration step that keeps every function's role at its session settings
 * (functions/lib/session-settings.ts; migrations/0180_role_session_settings.sql): the
 * reaper's and the ops function's roles, each declared consumer's login roles, and the
 * migration role itself, in this database. Run by provisionConsumerRoles, in its
 * transaction, on every deploy, so that a setting changed by hand comes back.
 */
import type { TransactionSql } from '../lib/db';
import { runtimeRoles, sessionKindOf, type RoleConsumer } from '../lib/database-roles';
import { roleSettingsOf, type SessionKind } from '../lib/session-settings';

/** `key=value`, as pg_db_role_setting holds a setting. */
function settingsArray(kind: SessionKind): string[] {
  return Object.entries(roleSettingsOf(kind)).map(([key, value]) => `${key}=${value}`);
}

export async function keepRoleSettings(tx: TransactionSql, consumers: readonly RoleConsumer[]): Promise<void> {
  for (const role of runtimeRoles(consumers)) {
    await tx`select integration.keep_role_settings(${role}, false, ${settingsArray(sessionKindOf(role))})`;
  }
  await tx`select integration.keep_role_settings(current_user, true, ${settingsArray('migrate')})`;
}
