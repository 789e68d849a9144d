/**
 * A batch whose COMMIT is refused for its data (a deferred constraint) cannot say which
 * row was at fault: the innocent rows of the batch are not quarantined with it.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { ErrorCodes } from '../../../functions/lib/errors';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow } from '../../helpers/factories';
import { inboxRow, withTrigger, work } from './support';
import { workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const sql = db.sql;
/** The code under test connects as the worker function does. */
const asWorker = db.as(workerRoleOf(caseProjection));

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary`;
});

const accepted = (caseId: string) => ({ aggregateId: caseId, payload: { caseId, acceptedAt: '2026-07-03T09:15:30Z' } });

describe('a batch refused at commit for its data', () => {
  it('quarantines only the row at fault; the other rows of the batch are processed', async () => {
    const refuseOne = {
      name: 'refuse_case_bad',
      on: 'read_model.case_summary',
      when: 'after insert',
      deferred: true,
      body: `if new.case_id = 'case_bad' then raise exception 'refused at commit' using errcode = '23514'; end if; return null;`,
    };
    await withTrigger(sql, refuseOne, async () => {
      const ok1 = await insertInboxRow(sql, { ...accepted('case_ok_1'), receivedSecondsAgo: 3 });
      const bad = await insertInboxRow(sql, { ...accepted('case_bad'), receivedSecondsAgo: 2 });
      const ok2 = await insertInboxRow(sql, { ...accepted('case_ok_2'), receivedSecondsAgo: 1 });

      const result = await work(asWorker, caseProjection);

      expect(result).toMatchObject({ claimed: 3, processed: 2, quarantined: 1, retried: 0 });
      expect(await inboxRow(sql, ok1.inbox_id)).toMatchObject({ status: 'PROCESSED', attempt_count: 1, locked_by: null });
      expect(await inboxRow(sql, ok2.inbox_id)).toMatchObject({ status: 'PROCESSED', attempt_count: 1, locked_by: null });
      const badRow = await inboxRow(sql, bad.inbox_id);
      expect(badRow).toMatchObject({
        status: 'QUARANTINED',
        error_code: ErrorCodes.DB_INTEGRITY_VIOLATION,
        attempt_count: 1,
        locked_by: null,
      });
      expect(badRow.error_detail).toMatchObject({ sqlState: '23514' });
      const cases = await sql<{ case_id: string }[]>`select case_id from read_model.case_summary order by case_id`;
      expect(cases.map((c) => c.case_id)).toEqual(['case_ok_1', 'case_ok_2']);
    });
  });
});
