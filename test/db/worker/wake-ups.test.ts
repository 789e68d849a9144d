/**
 * A worker invocation's slot, idle drain, fan-out and hand-over (functions/wings/wake-ups/invocation.ts,
 * docs/worker.md "Wake-ups"), through the invocation handler the Lambda handler runs, as
 * the worker's role, with the Lambda API mocked (aws-sdk-client-mock): the exact Invoke
 * commands a worker sends, and none beyond what its consumer's slots allow.
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { countDueLanes, countDueLanesStatement } from '../../../functions/wings/wake-ups/count-due-lanes';
import { leaveSlot } from '../../../functions/wings/wake-ups/worker-slot';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import type { Config } from '../../../functions/lib/config';
import { createWorkerInvocation, type InvocationDependencies, type InvocationResult } from '../../../functions/wings/wake-ups/invocation';
import { useTestDatabase } from '../../helpers/db';
import { nodes, type PlanNode } from '../../helpers/plans';
import { caseAcceptedPayload, insertInboxRows } from '../../helpers/factories';
import { invocationsOf, quietObservability, variant } from './support';

const db = await useTestDatabase();
const lambda = new LambdaClient({ region: 'eu-west-1' });
const lambdaMock = mockClient(lambda);
const WORKER = 'KafkaInbox-dev-stateless-CaseProjectionWorkerFunction-AbC123';
const CONSUMER = 'case-projection';

beforeEach(async () => {
  lambdaMock.reset();
  lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });
  await db.sql`truncate integration.consumer_inbox, integration.consumer_worker_slot, read_model.case_summary`;
});

type WorkerSettings = Partial<Config['worker']>;

function invocation(
  worker: WorkerSettings = {},
  options: Partial<Pick<InvocationDependencies, 'consumer' | 'sleep'>> & { wakeUps?: boolean } = {},
) {
  return createWorkerInvocation({
    sql: db.as(workerRoleOf({ name: CONSUMER })),
    consumer: options.consumer ?? getConsumer(CONSUMER),
    config: {
      worker: {
        batchSize: 100,
        safetyMarginMs: 1_000,
        leaseSeconds: 300,
        idleMs: 0,
        pollMs: 20,
        maxConcurrency: 3,
        fanOutDrainSeconds: 5,
        ...worker,
      },
      wakeUps: { enabled: options.wakeUps ?? true },
    },
    ...quietObservability(),
    self: { lambda, functionName: WORKER },
    random: () => 0,
    ...(options.sleep ? { sleep: options.sleep } : {}),
  });
}

const context = (awsRequestId: string, remaining: () => number = () => 600_000) => ({ awsRequestId, getRemainingTimeInMillis: remaining });

const accepted = (n: number) => Array.from({ length: n }, () => ({ payload: caseAcceptedPayload() }));

const invocations = () => invocationsOf(lambdaMock);

const slots = () =>
  db.sql<{ slot_no: number; held_by: string | null }[]>`
    select slot_no, held_by from integration.consumer_worker_slot where consumer_name = ${CONSUMER} order by slot_no`;

const statuses = async () =>
  (
    await db.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from integration.consumer_inbox group by status order by status`
  ).map((r) => `${r.status} ${r.n}`);

describe('a worker invocation and its slot', () => {
  it('takes the lowest free slot, drains, and frees it when nothing is due', async () => {
    await insertInboxRows(db.sql, accepted(3));

    const result = await invocation()({ source: 'schedule' }, context('req-s1'));

    expect(result).toEqual({
      claimed: 3,
      processed: 3,
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
    expect(await slots()).toEqual([
      { slot_no: 1, held_by: null },
      { slot_no: 2, held_by: null },
      { slot_no: 3, held_by: null },
    ]);
    expect(invocations()).toEqual([]);
  });

  it('takes the slot its invitation reserved', async () => {
    await insertInboxRows(db.sql, accepted(1));
    await db.sql`
      insert into integration.consumer_worker_slot (consumer_name, slot_no, held_by, held_until)
      values (${CONSUMER}, 1, null, null), (${CONSUMER}, 2, 'fan-out:w:2', now() + interval '10 seconds'), (${CONSUMER}, 3, null, null)`;

    const result = await invocation()({ source: 'fan-out', consumerName: CONSUMER, slot: 2, invitation: 'fan-out:w:2' }, context('req-i1'));

    expect(result).toMatchObject({ slot: 2, processed: 1, stoppedBy: 'idle' });
  });

  it('does nothing when every slot is held, its own invitation taken by someone else', async () => {
    await insertInboxRows(db.sql, accepted(2));
    await db.sql`
      insert into integration.consumer_worker_slot (consumer_name, slot_no, held_by, held_until)
      select ${CONSUMER}, n, 'worker:other:' || n, now() + interval '10 seconds' from generate_series(1, 3) n`;

    const result = await invocation()(
      { source: 'wake-up', consumerName: CONSUMER, slot: 1, invitation: 'wake-up:req-late' },
      context('req-late'),
    );

    expect(result).toMatchObject({ stoppedBy: 'no-slot', slot: null, claimed: 0 });
    expect(await statuses()).toEqual(['RECEIVED 2']);
  });

  it('gives a slot to at most maxConcurrency of the invocations that start at once', async () => {
    await insertInboxRows(db.sql, accepted(20));
    // One lane per claim: the first claims leave work due for every invocation's gate.
    const invoke = invocation({ idleMs: 500, maxConcurrency: 3, batchSize: 1 });

    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => invoke({ source: 'schedule' }, context(`req-c${i}`))));

    expect(results.map((r) => r.slot).sort()).toEqual([1, 2, 3, null, null]);
    expect(results.filter((r) => r.stoppedBy === 'no-slot')).toHaveLength(2);
    expect(results.reduce((n, r) => n + r.processed, 0)).toBe(20);
  });

  it('a scheduled invocation with nothing due sends one statement, takes no slot and invokes nobody', async () => {
    // Rows that are not due: one backing off, one finished.
    await insertInboxRows(db.sql, [
      { payload: caseAcceptedPayload(), status: 'RETRY_PENDING', attemptCount: 1, nextAttemptInSeconds: 600 },
      { payload: caseAcceptedPayload(), status: 'PROCESSED' },
    ]);
    const statements: string[] = [];
    const sql = db.client({ role: workerRoleOf({ name: CONSUMER }), debug: (_c: number, query: string) => statements.push(query) });

    const result = await createWorkerInvocation({
      sql,
      consumer: getConsumer(CONSUMER),
      config: {
        worker: { batchSize: 100, safetyMarginMs: 1_000, leaseSeconds: 300, idleMs: 10_000, pollMs: 250, maxConcurrency: 3 },
        wakeUps: { enabled: true },
      },
      ...quietObservability(),
      self: { lambda, functionName: WORKER },
    })({ source: 'schedule' }, context('req-idle'));

    expect(result).toMatchObject({ stoppedBy: 'nothing-due', slot: null, claimed: 0 });
    // Besides postgres.js's own lookup of array types, once per new connection.
    const own = statements.filter((q) => !q.includes('pg_catalog.pg_type'));
    expect(own).toHaveLength(1);
    expect(own[0]).toMatch(/^\s*select p\.paused_by/);
    expect(await slots()).toEqual([]);
    expect(invocations()).toEqual([]);
  });

  it('runs an event it does not recognize as a scheduled invocation', async () => {
    await insertInboxRows(db.sql, accepted(1));

    const result = await invocation()(
      { source: 'fan-out', consumerName: 'case-sla', slot: 2, invitation: 'fan-out:x:2' },
      context('req-odd'),
    );

    expect(result).toMatchObject({ slot: 1, processed: 1 });
  });
});

describe('awake', () => {
  it('drains rows that arrive while it is idle, and leaves when nothing came for the idle interval', async () => {
    await insertInboxRows(db.sql, accepted(1));
    let naps = 0;
    const sleep = async (ms: number) => {
      // Rows stored by ingest while the worker waits between claims.
      if (++naps === 2) await insertInboxRows(db.sql, accepted(2));
      await new Promise((r) => setTimeout(r, ms));
    };

    const result = await invocation({ idleMs: 300, pollMs: 20 }, { sleep })({ source: 'schedule' }, context('req-awake'));

    expect(result).toMatchObject({ claimed: 3, processed: 3, stoppedBy: 'idle', slot: 1 });
    expect(await statuses()).toEqual(['PROCESSED 3']);
    expect(invocations()).toEqual([]);
    expect((await slots())[0]).toEqual({ slot_no: 1, held_by: null });
  });

  it('keeps its slot, rather than leave, while a lane is due', async () => {
    await db.sql`
      insert into integration.consumer_worker_slot (consumer_name, slot_no, held_by, held_until)
      values (${CONSUMER}, 1, 'worker:me', now() + interval '10 seconds')`;
    await insertInboxRows(db.sql, accepted(1));
    const worker = db.as(workerRoleOf({ name: CONSUMER }));
    const slot = { consumerName: CONSUMER, slotNo: 1, owner: 'worker:me' };

    const whileDue = await leaveSlot(worker, { ...slot, mode: 'stay' });
    await db.sql`truncate integration.consumer_inbox`;
    const whenNothingIsDue = await leaveSlot(worker, { ...slot, mode: 'stay' });

    expect(whileDue).toBe('stayed');
    expect(whenNothingIsDue).toBe('left');
    expect(await slots()).toEqual([{ slot_no: 1, held_by: null }]);
  });
});

describe('fan-out', () => {
  it("wakes workers for a large backlog, never more than the consumer's maximum running at once", async () => {
    await insertInboxRows(db.sql, accepted(1_500));
    // A horizon this short makes any backlog "too much for one worker": fan-out is certain.
    const invoke = invocation({ batchSize: 25, maxConcurrency: 3, fanOutDrainSeconds: 0.001 });
    let running = 0;
    let peak = 0;
    const started: Promise<InvocationResult>[] = [];
    const tracked = async (event: unknown, requestId: string) => {
      running += 1;
      peak = Math.max(peak, running);
      try {
        return await invoke(event, context(requestId));
      } finally {
        running -= 1;
      }
    };
    // The simulated Lambda service: an accepted asynchronous Invoke starts the handler.
    lambdaMock.on(InvokeCommand).callsFake(async (input: { Payload: Uint8Array }) => {
      started.push(tracked(JSON.parse(Buffer.from(input.Payload).toString('utf8')), `req-invited-${started.length}`));
      return { StatusCode: 202 };
    });

    const first = await tracked({ source: 'schedule' }, 'req-fan');
    const invited = await Promise.all(started);

    expect(peak).toBe(3);
    expect(invocations()).toEqual([
      {
        FunctionName: WORKER,
        InvocationType: 'Event',
        Payload: {
          source: 'fan-out',
          consumerName: CONSUMER,
          slot: 2,
          invitation: expect.stringMatching(/^fan-out:worker:req-fan:[0-9a-f-]{36}:2$/),
        },
      },
      {
        FunctionName: WORKER,
        InvocationType: 'Event',
        Payload: {
          source: 'fan-out',
          consumerName: CONSUMER,
          slot: 3,
          invitation: expect.stringMatching(/^fan-out:worker:req-fan:[0-9a-f-]{36}:3$/),
        },
      },
    ]);
    expect(first).toMatchObject({ slot: 1, fannedOut: 2 });
    expect(invited.map((r) => r.slot).sort()).toEqual([2, 3]);
    expect(first.processed + invited.reduce((n, r) => n + r.processed, 0)).toBe(1_500);
    expect(invited.every((r) => r.processed > 0)).toBe(true);
    expect(await statuses()).toEqual(['PROCESSED 1500']);
  });

  it('wakes nobody when the backlog is one the worker drains alone within the horizon', async () => {
    await insertInboxRows(db.sql, accepted(60));

    const result = await invocation({ batchSize: 25, maxConcurrency: 3, fanOutDrainSeconds: 600 })(
      { source: 'schedule' },
      context('req-small'),
    );

    expect(result).toMatchObject({ processed: 60, fannedOut: 0 });
    expect(invocations()).toEqual([]);
  });

  it('wakes nobody with wake-ups switched off', async () => {
    await insertInboxRows(db.sql, accepted(300));

    const result = await invocation({ batchSize: 25, fanOutDrainSeconds: 0.001 }, { wakeUps: false })(
      { source: 'schedule' },
      context('req-off'),
    );

    expect(result).toMatchObject({ processed: 300, fannedOut: 0 });
    expect(invocations()).toEqual([]);
  });
});

describe('hand-over', () => {
  /** case-projection whose handler counts its calls: the budget "runs out" after `calls` of them. */
  function budgetOf(calls: number) {
    const base = getConsumer(CONSUMER);
    let handled = 0;
    const counted = Object.fromEntries(
      Object.entries(base.handlers).map(([type, versions]) => [
        type,
        Object.fromEntries(
          Object.entries(versions).map(([v, h]) => [
            v,
            {
              payload: h.payload,
              handle: async (tx: never, e: never, c: never) => {
                handled++;
                await h.handle(tx, e, c);
              },
            },
          ]),
        ),
      ]),
    );
    return { consumer: variant(base, { handlers: counted }), remaining: () => (handled < calls ? 600_000 : 500) };
  }

  it('invokes a successor in its own slot when the budget ends with work due; the successor drains the rest', async () => {
    await insertInboxRows(db.sql, accepted(100));
    const { consumer, remaining } = budgetOf(30);

    const first = await invocation({ batchSize: 10 }, { consumer })({ source: 'schedule' }, context('req-h', remaining));
    const [handOver] = invocations();
    const held = await slots();
    const successor = await invocation()(handOver!.Payload, context('req-h2'));

    expect(first).toMatchObject({ stoppedBy: 'budget', slot: 1, handedOver: true });
    expect(invocations()).toEqual([
      {
        FunctionName: WORKER,
        InvocationType: 'Event',
        Payload: {
          source: 'hand-over',
          consumerName: CONSUMER,
          slot: 1,
          invitation: expect.stringMatching(/^hand-over:worker:req-h:[0-9a-f-]{36}$/),
        },
      },
    ]);
    expect(held[0]).toEqual({ slot_no: 1, held_by: handOver!.Payload.invitation });
    expect(successor).toMatchObject({ slot: 1, stoppedBy: 'idle' });
    expect(first.processed + successor.processed).toBe(100);
    expect(await statuses()).toEqual(['PROCESSED 100']);
  });

  it('frees its slot instead, and invokes nothing, with wake-ups switched off', async () => {
    await insertInboxRows(db.sql, accepted(100));
    const { consumer, remaining } = budgetOf(30);

    const first = await invocation({ batchSize: 10 }, { consumer, wakeUps: false })(
      { source: 'schedule' },
      context('req-h-off', remaining),
    );

    expect(first).toMatchObject({ stoppedBy: 'budget', handedOver: false });
    expect(invocations()).toEqual([]);
    expect((await slots())[0]).toEqual({ slot_no: 1, held_by: null });
  });
});

describe('the backlog count fan-out reads', () => {
  it('reads the due-lane index up to its cap, whatever the backlog and however stale the statistics', async () => {
    // Statistics taken while nothing is due, as on a healthy inbox; then a backlog arrives.
    await db.sql`analyze integration.consumer_lane`;
    await insertInboxRows(db.sql, accepted(3_000));
    const worker = db.as(workerRoleOf({ name: CONSUMER }));

    const [row] = await worker<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>`
      explain (analyze, buffers, format json) ${countDueLanesStatement(worker, CONSUMER, 100)}`;
    const plan = row!['QUERY PLAN'][0].Plan;
    const scans = nodes(plan).filter((n) => n['Node Type'].includes('Scan'));

    expect(await countDueLanes(worker, CONSUMER, 100)).toBe(100);
    expect(await countDueLanes(worker, CONSUMER, 5_000)).toBe(3_000);
    expect(scans.map((n) => n['Index Name'])).toEqual(['consumer_lane_due_idx']);
    expect(scans[0]!['Actual Rows']).toBe(100);
    // An index range of 100 entries and their heap rows: a few dozen buffers, not the backlog's.
    expect(plan['Shared Hit Blocks']! + plan['Shared Read Blocks']!).toBeLessThan(60);
  });
});
