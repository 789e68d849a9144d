/**
 * The database goes away mid-batch (docs/design.md §3): the backend serving a worker's batch
 * transaction is terminated while a handler runs, on the one-savepoint fast path and on the
 * slow path. The worker settles with a classified connection error, nothing
 * of the batch commits, the rows stay PROCESSING under that owner until their lease expires,
 * and once the reaper returns them a second worker applies each exactly once.
 *
 * It relies on patches/postgres+3.4.9.patch: unpatched, postgres.js throws a TypeError from
 * a timer when the savepoint's rollback is written to the dead socket, and the process dies.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { defineHandler } from '../../../functions/framework';
import { releaseExpired } from '../../../functions/inbox/release-expired';
import { ErrorCodes, NonRetryableError, RetryableError } from '../../../functions/lib/errors';
import { newOwnerId } from '../../../functions/worker/run-worker';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { one, variant, work } from './support';
import { workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const admin = db.sql;
const APP = 'worker-under-kill';
// The worker's own pool, named so that the admin client can find its backend.
const workerSql = db.client({ max: 3, role: workerRoleOf(caseProjection), connection: { application_name: APP } });

await admin`create table public.effect (event_id text not null)`;
// The test consumer's own table: its worker role writes it, as a consumer migration would grant.
await admin`grant usage on schema public to inbox_worker_case_projection`;
await admin`grant insert on public.effect to inbox_worker_case_projection`;

beforeEach(async () => {
  await admin`truncate integration.consumer_inbox, public.effect`;
});

// In Lambda an exception thrown from a timer kills the process; vitest would merely report
// it beside passing tests. Record it here so that the test itself fails.
const uncaught: unknown[] = [];
const recordUncaught = (error: unknown) => uncaught.push(error);
process.prependListener('uncaughtException', recordUncaught);
afterAll(() => {
  process.removeListener('uncaughtException', recordUncaught);
});
afterEach(async () => {
  // Let any write queued on the dead socket fire before judging.
  await new Promise((resolve) => setImmediate(resolve));
  expect(uncaught.map(String)).toEqual([]);
  uncaught.length = 0;
});

const EFFECT = 'test.effect.v1';
const FAIL = 'test.fail.v1';

/** On which call of the effect handler (per event id) to block in pg_sleep; none when empty. */
let blockOnCall = new Map<string, number>();
const calls = new Map<string, number>();

const consumer = variant(caseProjection, {
  handlers: {
    [EFFECT]: {
      1: defineHandler({
        payload: z.object({}).passthrough(),
        async handle(tx, event) {
          const n = (calls.get(event.eventId) ?? 0) + 1;
          calls.set(event.eventId, n);
          await tx`insert into public.effect (event_id) values (${event.eventId})`;
          if (blockOnCall.get(event.eventId) === n) await tx`select pg_sleep(60)`;
        },
      }),
    },
    [FAIL]: {
      1: defineHandler({
        payload: z.object({}).passthrough(),
        async handle() {
          throw new NonRetryableError(ErrorCodes.PAYLOAD_INVALID, 'fails on purpose');
        },
      }),
    },
  },
});

/** Terminate the worker's backend once it is blocked in the handler's pg_sleep. */
async function killWhenBlocked(): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const [row] = await admin<{ killed: boolean }[]>`
      select pg_terminate_backend(pid) as killed from pg_stat_activity
      where application_name = ${APP} and state = 'active' and query like '%pg_sleep%'`;
    if (row?.killed) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the worker never blocked in its handler');
}

async function rowsState() {
  return admin<{ event_id: string; status: string; attempt_count: number; locked_by: string | null }[]>`
    select event_id, status, attempt_count, locked_by from integration.consumer_inbox order by event_id`;
}

async function effects(): Promise<Record<string, number>> {
  const rows = await admin<{ event_id: string; n: number }[]>`select event_id, count(*)::int as n from public.effect group by event_id`;
  return Object.fromEntries(rows.map((r) => [r.event_id, r.n]));
}

async function killMidBatch(eventTypes: string[], blockOn: { index: number; call: number }) {
  const rows = await insertInboxRows(
    admin,
    eventTypes.map((eventType, i) => ({
      eventType,
      eventId: `evt_${i}`,
      aggregateId: `agg_${i}`,
      payload: {},
      receivedSecondsAgo: 10 - i,
    })),
  );
  calls.clear();
  blockOnCall = new Map([[`evt_${blockOn.index}`, blockOn.call]]);
  const owner = newOwnerId('killed');

  const [outcome] = await Promise.allSettled([work(workerSql, consumer, { owner }), killWhenBlocked()]);

  // Settled, with a classified connection error rather than a crash or a hang.
  expect(outcome.status).toBe('rejected');
  const error = (outcome as PromiseRejectedResult).reason;
  expect(error).toBeInstanceOf(RetryableError);
  expect(error).toMatchObject({ code: ErrorCodes.DB_CONNECTION });
  // Nothing of the batch committed; every row still PROCESSING under the dead owner.
  expect(await effects()).toEqual({});
  for (const r of await rowsState()) expect(r).toMatchObject({ status: 'PROCESSING', locked_by: owner, attempt_count: 1 });
  return rows;
}

/** The lease runs out (moved back on the database's clock) and the reaper returns the rows. */
async function leaseExpiresAndReaperReturns(n: number) {
  await admin`update integration.consumer_inbox set lease_expires_at = now() - interval '1 second' where status = 'PROCESSING'`;
  const released = await releaseExpired(admin, consumer.name, consumer.retry.maxAttempts, 100);
  expect(released).toHaveLength(n);
}

describe('a database connection lost mid-batch', () => {
  it('fast path: the batch rolls back, the rows come back after their lease, and are applied once', async () => {
    await killMidBatch([EFFECT, EFFECT, EFFECT], { index: 1, call: 1 });
    await leaseExpiresAndReaperReturns(3);
    blockOnCall = new Map();

    // The same worker pool: a dead connection must not poison the next run.
    const result = await work(workerSql, consumer);

    expect(result).toMatchObject({ claimed: 3, processed: 3, retried: 0, quarantined: 0 });
    expect(await effects()).toEqual({ evt_0: 1, evt_1: 1, evt_2: 1 });
    for (const r of await rowsState()) expect(r).toMatchObject({ status: 'PROCESSED', attempt_count: 2, locked_by: null });
  });

  it('slow path: killed while it runs, the same guarantees hold', async () => {
    // evt_0 fails, so the fast path rolls back and the slow path runs the lanes by halves:
    // evt_0–evt_1 (rolled back), evt_0 alone (quarantined row by row), evt_1 alone (applied,
    // its third call); evt_2 blocks on its second call, alone, after evt_1 was applied.
    await killMidBatch([FAIL, EFFECT, EFFECT], { index: 2, call: 2 });
    expect(calls).toEqual(
      new Map([
        ['evt_1', 3],
        ['evt_2', 2],
      ]),
    );
    await leaseExpiresAndReaperReturns(3);
    blockOnCall = new Map();

    const result = await work(workerSql, consumer);

    expect(result).toMatchObject({ claimed: 3, processed: 2, quarantined: 1, retried: 0 });
    expect(await effects()).toEqual({ evt_1: 1, evt_2: 1 });
    const state = await rowsState();
    expect(state.map((r) => [r.event_id, r.status, r.attempt_count])).toEqual([
      ['evt_0', 'QUARANTINED', 2],
      ['evt_1', 'PROCESSED', 2],
      ['evt_2', 'PROCESSED', 2],
    ]);
    const { n } = await one(admin<{ n: number }[]>`select count(*)::int as n from integration.consumer_inbox where locked_by is not null`);
    expect(n).toBe(0);
  });
});
