/**
 * Which tables a consumer's role can lock beyond rows. PostgreSQL allows `LOCK TABLE` in
 * a mode above ROW EXCLUSIVE (the modes that stall other sessions' reads and writes, or a
 * migration's) to a role holding UPDATE, DELETE or TRUNCATE on the table, MAINTAIN from
 * PostgreSQL 17; privileges on columns do not count. Shared by the security test, which
 * holds this release's database to its list, and the next release's test, which holds the
 * database with the pending contracts applied to none.
 */
import type { Sql } from '../../../functions/lib/db';
import { consumerRolesOf, type DatabaseRole } from '../../../functions/lib/database-roles';
import type { ConsumerRoleDeclaration } from '../../../functions/lib/database-roles';

/** The weakest mode above ROW EXCLUSIVE, and the strongest. */
const MODES = ['share update exclusive', 'access exclusive'] as const;

/** `role table mode`, for each table `role` may lock in a mode above ROW EXCLUSIVE. */
export async function lockableByConsumerRoles(
  owner: Sql,
  consumers: readonly ConsumerRoleDeclaration[],
  as: (role: DatabaseRole) => Sql,
): Promise<string[]> {
  const relations = await owner<{ name: string }[]>`
    select format('%I.%I', n.nspname, c.relname) as name
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind in ('r', 'p', 'v', 'm', 'f')
      and n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'
    order by 1`;
  const lockable: string[] = [];
  for (const { role, consumerName } of consumerRolesOf(consumers)) {
    // A consumer's own tables (its declaration's) are its own to lock: nobody else uses them.
    const own = new Set(Object.keys(consumers.find((c) => c.name === consumerName)!.tables ?? {}));
    for (const { name } of relations) {
      if (own.has(name)) continue;
      for (const mode of MODES) {
        const outcome = await as(role)
          .begin(async (tx) => {
            // NOWAIT: a lock another session holds is still a lock this role was allowed to ask for.
            await tx.unsafe(`lock table ${name} in ${mode} mode nowait`);
            throw Object.assign(new Error('rollback'), { code: 'LOCKED' });
          })
          .catch((error: { code?: string }) => error.code);
        if (outcome === 'LOCKED' || outcome === '55P03') lockable.push(`${role} ${name} ${mode}`);
        else if (outcome !== '42501') throw new Error(`lock table ${name} in ${mode} mode as ${role}: unexpected ${outcome}`);
      }
    }
  }
  return lockable;
}
