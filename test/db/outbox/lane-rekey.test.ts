/**
 * Migration 0160 on a database with a backlog: the outbox lanes of the old key (one per
 * aggregate) become one lane per consumer with unpublished rows of that aggregate, each
 * keeping the old lane's state (a relay holding the aggregate holds each of them), and a lane
 * with nothing unpublished goes. Emitters write lanes by the new key afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../../../functions/lib/migration-files';
import { emptyDatabase, type TestDatabase } from '../../helpers/db';
import { insertOutboxRows } from './support';

let db: TestDatabase;
beforeAll(async () => {
  db = await emptyDatabase();
});
afterAll(() => db.drop());

interface LaneState {
  consumer_name: string;
  aggregate_id: string;
  locked_by: string | null;
  lease_left: boolean | null;
  due: boolean | null;
}

describe('migration 0160 on lanes keyed by aggregate', () => {
  it('splits each lane per consumer of its unpublished rows, its state kept; drops a lane with nothing unpublished', async () => {
    const migrations = await loadMigrations(MIGRATIONS_DIR);
    await migrate(
      db.sql,
      migrations.filter((m) => m.version < 160),
    );
    const sql = db.sql;
    // A: two consumers' rows, held by a relay; B: one consumer's, due; C: only a published row left.
    await insertOutboxRows(sql, [
      { aggregateId: 'A', consumerName: 'case-sla' },
      { aggregateId: 'A', consumerName: 'other-emitter' },
      { aggregateId: 'B', consumerName: 'other-emitter' },
      { aggregateId: 'C', consumerName: 'case-sla' },
    ]);
    await sql`update integration.outbox set published_at = now() where aggregate_id = 'C'`;
    await sql`
      update integration.outbox_lane
      set locked_by = 'relay:old', locked_at = now(), lease_expires_at = now() + interval '5 minutes', due_at = null
      where aggregate_id = 'A'`;

    await migrate(sql, migrations);

    const lanes = await sql<LaneState[]>`
      select consumer_name, aggregate_id, locked_by, lease_expires_at > now() as lease_left, due_at <= now() as due
      from integration.outbox_lane order by aggregate_id, consumer_name`;
    expect(lanes).toEqual([
      { consumer_name: 'case-sla', aggregate_id: 'A', locked_by: 'relay:old', lease_left: true, due: null },
      { consumer_name: 'other-emitter', aggregate_id: 'A', locked_by: 'relay:old', lease_left: true, due: null },
      { consumer_name: 'other-emitter', aggregate_id: 'B', locked_by: null, lease_left: null, due: true },
    ]);
    const [key] = await sql<{ key: string }[]>`
      select pg_get_constraintdef(oid) as key from pg_constraint where conname = 'outbox_lane_pk'`;
    expect(key!.key).toBe('PRIMARY KEY (consumer_name, aggregate_type, aggregate_id)');

    // An emitter after the migration: its lane is its consumer's.
    await insertOutboxRows(sql, [{ aggregateId: 'C', consumerName: 'case-sla' }]);
    expect(await sql`select consumer_name, aggregate_id from integration.outbox_lane where aggregate_id = 'C'`).toEqual([
      { consumer_name: 'case-sla', aggregate_id: 'C' },
    ]);
  });
});
