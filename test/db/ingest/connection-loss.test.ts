/**
 * A database that goes away MID-BATCH (docs/design.md §3): the backend serving the ingest
 * transaction is terminated while the batch is being stored. Nothing of the batch may be
 * committed, no record may turn into poison because of it, every partition is reported at
 * its first offset, and the redelivery stores everything once.
 *
 * The ingest is parked on a lock the test holds (an advisory lock taken by a test trigger,
 * or a table lock on notification_jobs), so the termination lands at a known statement;
 * the waiting backend is found in pg_locks and terminated from an admin client.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import type { KafkaBatchResponse } from '../../../functions/ingest/types';
import type { Sql } from '../../../functions/lib/db';
import { useTestDatabase } from '../../helpers/db';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import {
  CASE_TOPIC,
  caseAccepted,
  inboxRows,
  ingestFor,
  ingestRole,
  PAYMENT_TOPIC,
  paymentCompleted,
  poisonRows,
  truncateAll,
} from './support';

const db = await useTestDatabase();
/** The test's own connection: holds the locks and terminates the ingest's backend. */
const admin: Sql = db.client({ max: 2 });

const GATE = 0x1ece57;

beforeEach(() => truncateAll(db.sql));

afterEach(async () => {
  await db.sql`drop trigger if exists gate_for_test on integration.consumer_inbox`;
  await db.sql`drop function if exists public.gate_for_test()`;
});

/** Every inbox insert waits for the advisory lock GATE (released with the test's session). */
async function gateInboxInserts(): Promise<void> {
  await db.sql.unsafe(`
    create function public.gate_for_test() returns trigger language plpgsql as $$
    begin perform pg_advisory_xact_lock(${GATE}); return new; end $$;
    create trigger gate_for_test before insert on integration.consumer_inbox
      for each row execute function public.gate_for_test();`);
}

/** The pid of the one backend of this database waiting for a lock that matches `waiting`. */
async function waitingBackend(waiting: (q: Sql) => ReturnType<Sql>): Promise<number> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const rows = await admin<Array<{ pid: number }>>`
      select l.pid from pg_locks l join pg_stat_activity a using (pid)
      where not l.granted and a.backend_type = 'client backend' and a.datname = current_database()
        and ${waiting(admin)}`;
    if (rows.length > 1) throw new Error(`expected one waiting backend, found ${rows.length}`);
    if (rows.length === 1) return rows[0]!.pid;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('the ingest never reached the lock');
}

async function terminate(pid: number): Promise<void> {
  const [row] = await admin<Array<{ terminated: boolean }>>`select pg_terminate_backend(${pid}) as terminated`;
  expect(row!.terminated).toBe(true);
}

/** The documented response, spelled out: every partition at its first offset. */
function reportedBack(...items: Array<[string, number]>): KafkaBatchResponse {
  return { batchItemFailures: items.map(([partition, offset]) => ({ itemIdentifier: { partition, offset } })) };
}

describe('the ingest backend terminated mid-batch', () => {
  it('deferred consumer: terminated during the set-based insert, nothing is stored or poisoned, the redelivery stores it once', async () => {
    const events = [caseAccepted(), caseAccepted(), caseAccepted(), caseAccepted()];
    const event = mskEvent([
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 5, value: events[0] }),
      mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 6, value: events[1] }),
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 10, value: events[2] }),
      mskRecord({ topic: CASE_TOPIC, partition: 1, offset: 11, value: events[3] }),
      // A poison record in the same batch: it must not be written either.
      mskRecord({ topic: CASE_TOPIC, partition: 2, offset: 3, value: 'not json' }),
    ]);
    // One connection, like a Lambda container: the redelivery must reconnect on it.
    const ingest = ingestFor(db.client({ max: 1, role: ingestRole('case-projection') }), 'case-projection');
    await gateInboxInserts();

    const held = await admin.reserve();
    let settled;
    try {
      await held`select pg_advisory_lock(${GATE})`;
      const running = ingest(event);
      const pid = await waitingBackend((q) => q`l.locktype = 'advisory' and l.objid = ${GATE}`);
      await terminate(pid);
      settled = await running;
    } finally {
      await held`select pg_advisory_unlock_all()`;
      held.release();
    }

    expect(settled.strategy).toBeNull();
    expect(settled.response).toEqual(reportedBack([`${CASE_TOPIC}-0`, 5], [`${CASE_TOPIC}-1`, 10], [`${CASE_TOPIC}-2`, 3]));
    expect(await inboxRows(db.sql)).toEqual([]);
    expect(await poisonRows(db.sql)).toEqual([]);

    const again = await ingest(event);

    expect(again).toMatchObject({ strategy: 'direct', inserted: 4, poisoned: 1, duplicates: 0, response: { batchItemFailures: [] } });
    expect((await inboxRows(db.sql)).map((r) => [r.event_id, r.partition_no, r.offset_no, r.status])).toEqual([
      [events[0]!.eventId, 0, 5, 'RECEIVED'],
      [events[1]!.eventId, 0, 6, 'RECEIVED'],
      [events[2]!.eventId, 1, 10, 'RECEIVED'],
      [events[3]!.eventId, 1, 11, 'RECEIVED'],
    ]);
    expect(await poisonRows(db.sql)).toMatchObject([{ partition_no: 2, offset_no: 3, error_code: PoisonCodes.INVALID_JSON }]);
  });

  it('inline consumer: terminated while a handler runs in its savepoint, nothing is stored, the redelivery makes one job per event', async () => {
    const events = [paymentCompleted(), paymentCompleted(), paymentCompleted()];
    const event = mskEvent([
      mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 7, value: events[0] }),
      mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 8, value: events[1] }),
      mskRecord({ topic: PAYMENT_TOPIC, partition: 4, offset: 2, value: events[2] }),
      mskRecord({ topic: PAYMENT_TOPIC, partition: 4, offset: 3, value: 'not json' }),
    ]);
    const ingest = ingestFor(db.client({ max: 1, role: ingestRole('notification-service') }), 'notification-service');

    const held = await admin.reserve();
    let settled;
    try {
      await held`begin`;
      // The handler's insert into notification_jobs (row exclusive) waits behind this.
      await held`lock table public.notification_jobs in exclusive mode`;
      const running = ingest(event);
      const pid = await waitingBackend((q) => q`l.relation = 'public.notification_jobs'::regclass`);
      // Parked inside the handler: its inbox rows are already inserted in the same transaction.
      const [inTx] = await admin<Array<{ state: string; xact: boolean }>>`
        select state, backend_xid is not null as xact from pg_stat_activity where pid = ${pid}`;
      expect(inTx).toEqual({ state: 'active', xact: true });
      await terminate(pid);
      settled = await running;
    } finally {
      await held`rollback`;
      held.release();
    }

    expect(settled.strategy).toBeNull();
    expect(settled).toMatchObject({ inserted: 0, processed: 0, poisoned: 0 });
    expect(settled.response).toEqual(reportedBack([`${PAYMENT_TOPIC}-0`, 7], [`${PAYMENT_TOPIC}-4`, 2]));
    expect(await inboxRows(db.sql)).toEqual([]);
    expect(await poisonRows(db.sql)).toEqual([]);
    expect(await db.sql`select 1 from public.notification_jobs`).toHaveLength(0);

    const again = await ingest(event);

    expect(again).toMatchObject({ strategy: 'direct', inserted: 3, processed: 3, poisoned: 1, response: { batchItemFailures: [] } });
    expect((await inboxRows(db.sql)).map((r) => [r.event_id, r.status])).toEqual(events.map((e) => [e.event_id, 'PROCESSED']));
    expect(await poisonRows(db.sql)).toMatchObject([{ partition_no: 4, offset_no: 3, error_code: PoisonCodes.INVALID_JSON }]);
    const jobs = await db.sql<Array<{ source_event_id: string; n: number }>>`
      select source_event_id, count(*)::int as n from public.notification_jobs group by source_event_id order by source_event_id`;
    expect(jobs).toEqual(
      events.map((e) => ({ source_event_id: e.event_id, n: 1 })).sort((a, b) => (a.source_event_id < b.source_event_id ? -1 : 1)),
    );
  });

  it('inline consumer: a handler whose savepoint was already released leaves no job when the backend dies after it', async () => {
    const events = [paymentCompleted(), paymentCompleted()];
    const event = mskEvent([
      mskRecord({ topic: PAYMENT_TOPIC, partition: 1, offset: 20, value: events[0] }),
      mskRecord({ topic: PAYMENT_TOPIC, partition: 1, offset: 21, value: events[1] }),
    ]);
    const ingest = ingestFor(db.client({ max: 1, role: ingestRole('notification-service') }), 'notification-service');
    // The second job waits for GATE: the first handler has completed (its job is visible
    // to its own transaction) when the backend is terminated. SECURITY DEFINER: the test's
    // gate reads the jobs, which the ingest role itself may not.
    await db.sql.unsafe(`
      create function public.gate_for_test() returns trigger language plpgsql security definer as $$
      begin
        if exists (select 1 from public.notification_jobs) then perform pg_advisory_xact_lock(${GATE}); end if;
        return new;
      end $$;
      create trigger gate_for_test before insert on public.notification_jobs
        for each row execute function public.gate_for_test();`);

    const held = await admin.reserve();
    let settled;
    try {
      await held`select pg_advisory_lock(${GATE})`;
      const running = ingest(event);
      await terminate(await waitingBackend((q) => q`l.locktype = 'advisory' and l.objid = ${GATE}`));
      settled = await running;
    } finally {
      await held`select pg_advisory_unlock_all()`;
      held.release();
      await db.sql`drop trigger if exists gate_for_test on public.notification_jobs`;
    }

    expect(settled.strategy).toBeNull();
    expect(settled.response).toEqual(reportedBack([`${PAYMENT_TOPIC}-1`, 20]));
    expect(await inboxRows(db.sql)).toEqual([]);
    expect(await db.sql`select 1 from public.notification_jobs`).toHaveLength(0);

    const again = await ingest(event);

    expect(again).toMatchObject({ strategy: 'direct', inserted: 2, processed: 2 });
    const jobs = await db.sql<
      Array<{ source_event_id: string }>
    >`select source_event_id from public.notification_jobs order by source_event_id`;
    expect(jobs.map((j) => j.source_event_id)).toEqual(events.map((e) => e.event_id).sort());
  });
});
