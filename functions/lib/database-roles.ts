/**
 * The database roles the functions connect as, one per function (migrations/0045 creates
 * them, 0046 grants what each function's code uses). The CDK app reads these names for the
 * functions' `rds-db:connect` permissions and DB_IAM_USER; the local run and the tests
 * connect each function as its role, so a missing grant fails a test, not a deploy.
 */
import type { Mode } from '../consumers/types';

export const DatabaseRoles = {
  /** Every ingest function: stores inbox and poison rows. */
  ingest: 'inbox_ingest',
  /** An inline consumer's ingest: a member of inbox_ingest that also finishes its rows and writes its consumer's tables. */
  ingestInline: 'inbox_ingest_inline',
  worker: 'inbox_worker',
  reaper: 'inbox_reaper',
  ops: 'inbox_ops',
  /** The outbox relay: claims, publishes and purges outbox rows. */
  relay: 'inbox_relay',
} as const;

export type DatabaseRole = (typeof DatabaseRoles)[keyof typeof DatabaseRoles];

export const RUNTIME_ROLES: readonly DatabaseRole[] = Object.values(DatabaseRoles);

/** The role of a consumer's ingest function. */
export function ingestRoleOf(consumer: { mode: Mode }): DatabaseRole {
  return consumer.mode === 'inline' ? DatabaseRoles.ingestInline : DatabaseRoles.ingest;
}
