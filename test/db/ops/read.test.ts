import { beforeEach, describe, expect, it } from 'vitest';
import { CONSUMERS } from '../../../functions/consumers/index';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, insertPoisonRow } from '../../helpers/factories';
import { isoMinutesAgo, opsDeps, opsError, run } from './support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const deps = opsDeps(db.as(DatabaseRoles.ops));

beforeEach(async () => {
  await db.sql`truncate integration.consumer_inbox, integration.consumer_raw_poison, integration.consumed_events`;
});

describe('stats', () => {
  it('counts rows per consumer and status, the due backlog and its oldest age, quarantine and unresolved poison', async () => {
    await insertInboxRows(db.sql, [
      { status: 'RECEIVED', receivedSecondsAgo: 120 },
      { status: 'RECEIVED', receivedSecondsAgo: 10 },
      { status: 'RETRY_PENDING', nextAttemptInSeconds: -300 },
      { status: 'RETRY_PENDING', nextAttemptInSeconds: 600 },
      { status: 'PROCESSED' },
      { status: 'QUARANTINED' },
      { status: 'QUARANTINED' },
      { status: 'IGNORED', consumerName: 'case-sla' },
    ]);
    const { poison_id } = await insertPoisonRow(db.sql, { consumerName: 'case-projection', createdSecondsAgo: 3600 });
    await insertPoisonRow(db.sql, { consumerName: 'case-projection' });
    await db.sql`update integration.consumer_raw_poison set resolved_at = now() where poison_id = ${poison_id}`;

    const { consumers } = await run(deps, { command: 'stats' });

    // Every declared consumer, in name order; the shipped ones are this test's fixtures.
    expect(consumers.map((c: { consumer: string }) => c.consumer)).toEqual(CONSUMERS.map((c) => c.name).sort());
    const named = (name: string) => consumers.find((c: { consumer: string }) => c.consumer === name);
    const [projection, sla, notifications] = ['case-projection', 'case-sla', 'notification-service'].map(named);
    expect(projection).toMatchObject({
      declared: true,
      statuses: { RECEIVED: 2, PROCESSING: 0, PROCESSED: 1, RETRY_PENDING: 2, QUARANTINED: 2, IGNORED: 0 },
      total: 8 - 1,
      due: 3,
      quarantined: 2,
      poisonUnresolved: 1,
    });
    // The retry due 300 s ago is the oldest due row; the one due in 600 s is not due.
    expect(projection.oldestDueAgeSeconds).toBeGreaterThanOrEqual(300);
    expect(projection.oldestDueAgeSeconds).toBeLessThan(3600);
    expect(sla).toMatchObject({ statuses: { IGNORED: 1 }, due: 0, oldestDueAgeSeconds: null, poisonUnresolved: 0 });
    expect(notifications).toMatchObject({ total: 0, due: 0, poisonUnresolved: 0 });
  });

  it('narrows to one consumer and refuses an unknown one', async () => {
    await insertInboxRows(db.sql, [{ status: 'RECEIVED' }, { status: 'RECEIVED', consumerName: 'case-sla' }]);
    const { consumers } = await run(deps, { command: 'stats', consumer: 'case-sla' });
    expect(consumers).toHaveLength(1);
    expect(consumers[0]).toMatchObject({ consumer: 'case-sla', statuses: { RECEIVED: 1 } });
    await opsError(run(deps, { command: 'stats', consumer: 'nobody' }), 'UNKNOWN_CONSUMER');
  });
});

describe('stats: rows received in a window', () => {
  /** Rows received `minutesAgo`, one in every status, the finished ones ending `finishedMinutesAgo`. */
  async function receivedInEveryStatus(minutesAgo: number, finishedMinutesAgo: number, eventType = 'regulatory.case.accepted.v1') {
    const rows = await insertInboxRows(
      db.sql,
      (['RECEIVED', 'RETRY_PENDING', 'PROCESSING', 'PROCESSED', 'IGNORED', 'QUARANTINED'] as const).map((status) => ({
        status,
        eventType,
        receivedSecondsAgo: minutesAgo * 60,
      })),
    );
    const ids = rows.map((r) => r.inbox_id);
    await db.sql`
      update integration.consumer_inbox
      set processed_at = case when processed_at is null then null else now() - make_interval(mins => ${finishedMinutesAgo}) end,
          quarantined_at = case when quarantined_at is null then null else now() - make_interval(mins => ${finishedMinutesAgo}) end
      where inbox_id = any(${ids}::uuid[])`;
    return rows;
  }

  it("counts the last hour's rows per consumer and event type, whatever became of them", async () => {
    await receivedInEveryStatus(10, 5);
    const [purged] = await insertInboxRows(db.sql, [
      { status: 'PROCESSED', eventType: 'regulatory.case.status-changed.v1', receivedSecondsAgo: 1200 },
    ]);
    await db.sql`update integration.consumer_inbox set payload_purged_at = now(), payload = '{}' where inbox_id = ${purged!.inbox_id}`;
    await insertInboxRows(db.sql, [{ consumerName: 'case-sla', status: 'IGNORED', receivedSecondsAgo: 60 }]);
    // Received before the window, finished inside it: not received in the window.
    await receivedInEveryStatus(120, 5);

    const { received } = await run(deps, { command: 'stats' });

    expect(received.rows).toEqual([
      { consumer: 'case-projection', eventType: 'regulatory.case.accepted.v1', received: 6 },
      { consumer: 'case-projection', eventType: 'regulatory.case.status-changed.v1', received: 1 },
      { consumer: 'case-sla', eventType: 'regulatory.case.accepted.v1', received: 1 },
    ]);
    const [window] = await db.sql<{ age: number }[]>`select extract(epoch from now() - ${received.since}::timestamptz)::float8 as age`;
    expect(Math.round(window!.age / 60)).toBe(60);
  });

  it('takes another window with --since, as a duration or an instant, and one consumer with --consumer', async () => {
    await receivedInEveryStatus(10, 5);
    await receivedInEveryStatus(120, 90);
    await insertInboxRows(db.sql, [{ consumerName: 'case-sla', receivedSecondsAgo: 60 }]);
    const at = await isoMinutesAgo(db.sql, 30);

    const wide = await run(deps, { command: 'stats', since: '3h', consumer: 'case-projection' });
    const narrow = await run(deps, { command: 'stats', since: at });

    expect(wide.received.rows).toEqual([{ consumer: 'case-projection', eventType: 'regulatory.case.accepted.v1', received: 12 }]);
    expect(narrow.received.rows).toEqual([
      { consumer: 'case-projection', eventType: 'regulatory.case.accepted.v1', received: 6 },
      { consumer: 'case-sla', eventType: 'regulatory.case.accepted.v1', received: 1 },
    ]);
    await opsError(run(deps, { command: 'stats', since: 'last week' }), 'BAD_ARGUMENTS');
  });

  it('counts rows that left the inbox at their payload retention from their kept keys', async () => {
    await insertInboxRows(db.sql, [{ status: 'PROCESSED', receivedSecondsAgo: 2 * 86_400 }]);
    await db.sql`
      insert into integration.consumed_events (consumer_name, event_id, inbox_id, event_type, status, topic_name,
        partition_no, offset_no, received_at, processed_at, dedupe_until)
      values ('case-projection', 'evt-left-10d', gen_random_uuid(), 'regulatory.case.status-changed.v1', 'PROCESSED',
              'regulatory.case.events.v1', 0, 7, now() - interval '10 days', now() - interval '10 days', now() + interval '20 days'),
             ('case-projection', 'evt-left-25d', gen_random_uuid(), 'regulatory.case.status-changed.v1', 'PROCESSED',
              'regulatory.case.events.v1', 0, 8, now() - interval '25 days', now() - interval '25 days', now() + interval '5 days')`;

    const twelveDays = await run(deps, { command: 'stats', since: '12d' });
    const lastHour = await run(deps, { command: 'stats' });

    expect(twelveDays.received.rows).toEqual([
      { consumer: 'case-projection', eventType: 'regulatory.case.accepted.v1', received: 1 },
      { consumer: 'case-projection', eventType: 'regulatory.case.status-changed.v1', received: 1 },
    ]);
    expect(lastHour.received.rows).toEqual([]);
  });
});

describe('quarantine', () => {
  it("groups as the case inbox design's summary: consumer, event type, error code, total, first and last seen", async () => {
    await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
      { status: 'QUARANTINED', errorCode: 'MAX_ATTEMPTS_EXCEEDED' },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', consumerName: 'case-sla' },
      { status: 'PROCESSED', errorCode: null },
    ]);
    await db.sql`update integration.consumer_inbox set quarantined_at = now() - interval '1 hour'
                 where error_code = 'PAYLOAD_INVALID' and consumer_name = 'case-projection'
                   and inbox_id = (select min(inbox_id::text)::uuid from integration.consumer_inbox
                                   where error_code = 'PAYLOAD_INVALID' and consumer_name = 'case-projection')`;

    const { summary } = await run(deps, { command: 'quarantine' });

    expect(summary.map((s: Record<string, unknown>) => [s.consumer_name, s.error_code, s.total])).toEqual([
      ['case-projection', 'PAYLOAD_INVALID', 2],
      ['case-projection', 'MAX_ATTEMPTS_EXCEEDED', 1],
      ['case-sla', 'PAYLOAD_INVALID', 1],
    ]);
    const first = summary[0];
    expect(first.last_seen.getTime() - first.first_seen.getTime()).toBeGreaterThanOrEqual(3_599_000);
    const { summary: sla } = await run(deps, { command: 'quarantine', consumer: 'case-sla' });
    expect(sla).toHaveLength(1);
  });

  it('pages through quarantined rows newest first by keyset, without payloads unless asked', async () => {
    const rows = await insertInboxRows(
      db.sql,
      Array.from({ length: 5 }, () => ({ status: 'QUARANTINED' as const, errorCode: 'PAYLOAD_INVALID' })),
    );
    // Two rows share a timestamp: the id breaks the tie, so none is skipped or repeated.
    await db.sql`
      update integration.consumer_inbox i
      set quarantined_at = '2026-07-03T10:00:00.123456Z'::timestamptz - make_interval(secs => o.n)
      from (select inbox_id, least(row_number() over (order by inbox_id), 4) as n from integration.consumer_inbox) o
      where o.inbox_id = i.inbox_id`;
    const expected = (await db.sql`select inbox_id from integration.consumer_inbox order by quarantined_at desc, inbox_id desc`).map(
      (r) => r.inbox_id,
    );

    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 5; page++) {
      const result = await run(deps, { command: 'quarantine-list', limit: 2, ...(cursor ? { cursor } : {}) });
      for (const row of result.rows) {
        expect(row).not.toHaveProperty('payload');
        seen.push(row.inbox_id);
      }
      if (result.nextCursor === null) break;
      cursor = result.nextCursor;
    }

    expect(seen).toEqual(expected);
    expect(rows).toHaveLength(5);
    const withPayload = await run(deps, { command: 'quarantine-list', limit: 1, includePayload: true });
    expect(withPayload.rows[0].payload).toHaveProperty('caseId');
    await opsError(run(deps, { command: 'quarantine-list', cursor: 'garbage' }), 'BAD_ARGUMENTS');
  });
});

describe('poison', () => {
  it('lists unresolved rows by default, without raw values, and shows one with it', async () => {
    const a = await insertPoisonRow(db.sql, { consumerName: 'case-projection', rawValue: '{"broken', createdSecondsAgo: 20 });
    const b = await insertPoisonRow(db.sql, { consumerName: 'case-projection', rawValue: 'xyz', createdSecondsAgo: 10 });
    const c = await insertPoisonRow(db.sql, { consumerName: 'case-sla' });
    await db.sql`update integration.consumer_raw_poison set resolved_at = now(), resolved_by = 'bob' where poison_id = ${b.poison_id}`;

    const unresolved = await run(deps, { command: 'poison-list', consumer: 'case-projection' });
    expect(unresolved.rows.map((r: { poison_id: string }) => r.poison_id)).toEqual([a.poison_id]);
    expect(unresolved.rows[0]).not.toHaveProperty('raw_value');
    expect(unresolved.rows[0]).toMatchObject({ raw_length: 8, error_code: 'INVALID_JSON' });

    const all = await run(deps, { command: 'poison-list', includeResolved: true });
    expect(all.rows.map((r: { poison_id: string }) => r.poison_id).sort()).toEqual([a.poison_id, b.poison_id, c.poison_id].sort());

    const shown = await run(deps, { command: 'poison-show', id: a.poison_id });
    expect(shown.row).toMatchObject({ poison_id: a.poison_id, raw_value: '{"broken', raw_encoding: 'utf8' });
    await opsError(run(deps, { command: 'poison-show', id: '00000000-0000-4000-8000-000000000000' }), 'NOT_FOUND');
  });
});
