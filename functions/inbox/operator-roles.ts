/**
 * The operators' own database roles (migrations/0203_operator_audit_by_the_database.sql),
 * provisioned for the stage's declared operators by the migration step, after the consumer
 * roles: in the deploy-time migration function and `npm run migrate`.
 *
 * Each operator gets `inbox_ops_<name>`: a login role, a member of inbox_ops (so it may do
 * what the ops function may), of rds_iam on Aurora (IAM authentication, as the functions'
 * roles), and nothing else. The database records it as the author of every audit row its
 * sessions write (`session_role`), whatever actor the row names. An operator no longer
 * declared has their role retired: NOLOGIN.
 *
 * One transaction, serialized with a concurrent run on the roles' table (as the consumer
 * roles' step is): a declaration that does not fit (a name taken by a consumer's role, a
 * role that exists with more than LOGIN) changes nothing and fails the deployment.
 */
import type { Sql } from '../lib/db';
import { operatorRole, type OperatorRole } from '../lib/database-roles';

export interface OperatorRolesResult {
  /** The declared operators' roles, as provisioned. */
  roles: OperatorRole[];
  /** Roles of operators no longer declared, retired by this run. */
  retired: string[];
}

export async function provisionOperatorRoles(sql: Sql, operators: readonly string[]): Promise<OperatorRolesResult> {
  const roles = [...new Set(operators.map(operatorRole))];
  return sql.begin(async (tx) => {
    await tx`lock table integration.operator_role in share row exclusive mode`;
    for (const role of roles) await tx`select integration.provision_operator_role(${role})`;
    const retired = await tx<{ role: string }[]>`select integration.retire_operator_roles(${roles}::name[]) as role`;
    return { roles, retired: retired.map((r) => r.role) };
  });
}
