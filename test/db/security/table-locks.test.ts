/**
 * No locks beyond rows: a consumer's role cannot take a table lock that stalls other
 * consumers (migrations/0200_row_deletes_without_table_locks.sql). Its deletes on shared
 * tables go through functions that reach its own consumer's rows only; the table-level
 * DELETE the release before this one still uses is revoked by the contract waiting in
 * migrations/next/ (test/db/upgrade/next-release.test.ts holds the database with it
 * applied to no lockable table at all).
 */
import { describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { caseSla } from '../../../functions/consumers/case-sla';
import { CONSUMERS } from '../../../functions/consumers/index';
import { relayRoleOf, workerRoleOf } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { insertOutboxRows } from '../outbox/support';
import { rolesOfKind } from './privileges';
import { lockableByConsumerRoles } from './table-locks';

const db = await useTestDatabase();

/** What the pending contract (migrations/next/0001_revoke_consumer_table_deletes.sql) takes away. */
const UNTIL_THE_CONTRACT = [
  ...rolesOfKind('worker').map((role) => [role, 'integration.consumer_lane']),
  ...rolesOfKind('relay').flatMap((role) => [
    [role, 'integration.outbox'],
    [role, 'integration.outbox_lane'],
  ]),
].flatMap(([role, table]) => [`${role} ${table} share update exclusive`, `${role} ${table} access exclusive`]);

describe('table locks', () => {
  it("as each consumer's role, LOCK TABLE above ROW EXCLUSIVE is refused on every shared table, but for the DELETE the previous release still uses", async () => {
    const lockable = await lockableByConsumerRoles(db.sql, CONSUMERS, db.as);

    expect(lockable.sort()).toEqual([...UNTIL_THE_CONTRACT].sort());
  });

  it("deletes a worker's own consumer's lanes through its function, and refuses another consumer's", async () => {
    const worker = workerRoleOf(caseProjection);
    await db.sql`
      insert into integration.consumer_lane (consumer_name, aggregate_type, aggregate_id, due_at)
      values ('case-projection', 'case', 'own', now()), ('case-sla', 'case', 'other', now())`;
    const ctids = (await db.sql<{ ctid: string }[]>`select ctid::text from integration.consumer_lane`).map((r) => r.ctid);

    const refused = await db.as(worker)`select integration.delete_claimed_lanes('case-sla', ${ctids}::tid[])`.catch(
      (e: { code?: string }) => e.code,
    );
    const [own] = await db.as(worker)<{ n: number }[]>`select integration.delete_claimed_lanes('case-projection', ${ctids}::tid[]) as n`;

    expect(refused).toBe('42501');
    expect(own).toEqual({ n: 1 });
    expect(await db.sql`select consumer_name, aggregate_id from integration.consumer_lane`).toEqual([
      { consumer_name: 'case-sla', aggregate_id: 'other' },
    ]);
  });

  it("deletes a relay's own consumer's published rows and idle lanes through its functions, and refuses another consumer's", async () => {
    const relay = relayRoleOf(caseSla);
    await db.sql`truncate integration.outbox, integration.outbox_lane`;
    await insertOutboxRows(db.sql, [{ aggregateId: 'a' }, { aggregateId: 'b', consumerName: 'case-projection' }]);
    await db.sql`update integration.outbox set published_at = now() - interval '30 days'`;
    await db.sql`update integration.outbox_lane set due_at = null`;

    const refusals = await Promise.all([
      db.as(relay)`select integration.delete_published_outbox('case-projection', 7, 100)`.catch((e: { code?: string }) => e.code),
      db.as(relay)`select integration.delete_idle_outbox_lanes(array['case-projection'], array['case'], array['b'])`.catch(
        (e: { code?: string }) => e.code,
      ),
    ]);
    const [purged] = await db.as(relay)<{ n: number }[]>`select integration.delete_published_outbox('case-sla', 7, 100) as n`;
    const [idle] = await db.as(relay)<{ n: number }[]>`
      select integration.delete_idle_outbox_lanes(array['case-sla'], array['case'], array['a']) as n`;

    expect(refusals).toEqual(['42501', '42501']);
    expect([purged, idle]).toEqual([{ n: 1 }, { n: 1 }]);
    expect(await db.sql`select consumer_name from integration.outbox`).toEqual([{ consumer_name: 'case-projection' }]);
    expect(await db.sql`select consumer_name from integration.outbox_lane`).toEqual([{ consumer_name: 'case-projection' }]);
  });
});
