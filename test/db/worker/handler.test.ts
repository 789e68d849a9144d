/**
 * The Lambda entry point, wired as in AWS: configuration from the environment at cold start,
 * the shared client, the remaining time and request id from the context.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { loadConfig } from '../../../functions/lib/config';
import { getSql } from '../../../functions/lib/db';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';

const db = await useTestDatabase();

describe('worker handler', () => {
  // The one place a test sets the environment: the module reads it at import, as at cold start.
  process.env.DATABASE_URL = db.urlAs(workerRoleOf({ name: 'case-projection' }));
  process.env.CONSUMER_NAME = 'case-projection';
  process.env.LOG_LEVEL = 'SILENT';
  // Stop at the first empty claim instead of staying awake for the default idle interval.
  process.env.WORKER_IDLE_MS = '0';
  afterAll(async () => {
    await (await getSql(loadConfig().database)).end({ timeout: 5 });
  });

  it('drains the configured consumer and returns the counts', async () => {
    await insertInboxRows(db.sql, [
      { payload: { caseId: 'case_h1', acceptedAt: '2026-07-03T09:15:30Z' } },
      { payload: { caseId: 'case_h2', acceptedAt: '2026-07-03T09:15:30Z' } },
      { consumerName: 'case-sla', payload: { caseId: 'case_h3', acceptedAt: '2026-07-03T09:15:30Z' } },
    ]);
    const { workerLambda } = await import('../../../functions/worker/handler');
    const handler = await workerLambda(getConsumer('case-projection'));

    const result = await handler({}, { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 60_000 } as never);

    expect(result).toEqual({
      claimed: 2,
      processed: 2,
      retried: 0,
      quarantined: 0,
      ignored: 0,
      released: 0,
      lost: 0,
      stoppedBy: 'idle',
      slot: 1,
      fannedOut: 0,
      handedOver: false,
    });
    const rows = await db.sql<{ consumer_name: string; status: string }[]>`
      select consumer_name, status from integration.consumer_inbox order by consumer_name, status`;
    expect(rows).toEqual([
      { consumer_name: 'case-projection', status: 'PROCESSED' },
      { consumer_name: 'case-projection', status: 'PROCESSED' },
      { consumer_name: 'case-sla', status: 'RECEIVED' },
    ]);
    // Its slot is free again: the next ingest batch may wake a worker.
    expect(
      await db.sql`select slot_no, held_by from integration.consumer_worker_slot where consumer_name = 'case-projection' and held_by is not null`,
    ).toEqual([]);
  });
});
