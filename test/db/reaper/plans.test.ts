/**
 * The reaper's statements read indexes, not the table: with a history of finished rows
 * far larger than the backlog, EXPLAIN shows no sequential scan of the inbox or the
 * poison table. The statements are the real ones, captured from postgres.js as sent.
 */
import { beforeAll, describe, it } from 'vitest';
import { readGauges } from '../../../functions/inbox/gauges';
import { deleteExpiredKeys, deletePoison, retireFinished } from '../../../functions/inbox/purge';
import { releaseExpired } from '../../../functions/inbox/release-expired';
import { DEFAULT_RETENTION } from '../../../functions/framework/types';
import { useTestDatabase } from '../../helpers/db';
import { arrangeHistory, expectIndexOnly } from '../../helpers/plans';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();

describe('reaper: query plans with a large history', () => {
  beforeAll(() => arrangeHistory(db.sql));

  it('gauges: due rows from a due-row partial index, quarantine and poison from theirs', async () => {
    await expectIndexOnly(
      db,
      (sql) => readGauges(sql, ['case-projection', 'case-sla']),
      ['consumer_inbox_quarantine_idx', 'consumer_raw_poison_created_idx'],
      DatabaseRoles.reaper,
    );
  });

  it('expired leases: from the in-flight partial index', async () => {
    await expectIndexOnly(
      db,
      (sql) => releaseExpired(sql, 'case-projection', 10, 1000),
      ['consumer_inbox_in_flight_lane_idx'],
      DatabaseRoles.reaper,
    );
  });

  it("retention: from the finished-row partial index, the keys' window index and the poison index", async () => {
    await expectIndexOnly(
      db,
      async (sql) => {
        await retireFinished(sql, 'case-projection', DEFAULT_RETENTION, 1000);
        await deleteExpiredKeys(sql, 'case-projection', 1000);
        await deletePoison(sql, 'case-projection', DEFAULT_RETENTION, 1000);
      },
      ['consumer_inbox_finished_idx', 'consumed_events_dedupe_until_idx', 'consumer_raw_poison_created_idx'],
      DatabaseRoles.reaper,
    );
  });
});
