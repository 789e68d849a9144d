import { describe, expect, it } from 'vitest';
import { CONSUMERS } from '../../../functions/consumers/index';
import type { ConsumerDeclaration } from '../../../functions/framework/types';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow, insertInboxRows, insertPoisonRow, type InboxRowSpec } from '../../helpers/factories';
import { reap } from './support';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { CASE_TOPIC, caseAccepted, ingestFor } from '../ingest/support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const DAY = 86_400;

/** Age a finished row: it finished `processedDaysAgo`. */
async function age(inboxId: string, processedDaysAgo: number): Promise<void> {
  await db.sql`
    update integration.consumer_inbox
    set received_at = now() - make_interval(days => ${processedDaysAgo}) - interval '1 minute',
        processed_at = now() - make_interval(days => ${processedDaysAgo})
    where inbox_id = ${inboxId}`;
}

async function find(inboxId: string): Promise<{ inbox_id: string; status: string; payload: Record<string, unknown> } | undefined> {
  const [r] = await db.sql<{ inbox_id: string; status: string; payload: Record<string, unknown> }[]>`
    select inbox_id, status, payload from integration.consumer_inbox where inbox_id = ${inboxId}`;
  return r;
}

interface KeptKey {
  inbox_id: string;
  status: string;
  processed_at: Date;
  quarantined_at: Date | null;
  error_code: string | null;
  window_days: number;
}

async function keyOf(inboxId: string): Promise<KeptKey | undefined> {
  const [k] = await db.sql<KeptKey[]>`
    select inbox_id, status, processed_at, quarantined_at, error_code,
           round(extract(epoch from dedupe_until - processed_at)::numeric / 86400, 3)::float8 as window_days
    from integration.consumed_events where inbox_id = ${inboxId}`;
  return k;
}

/** A redelivery as the ingest function stores it (its own statement, as its own role). */
async function redeliver(consumerName: string, eventId: string): Promise<number> {
  const event = mskEvent([mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 1, value: caseAccepted(eventId) })]);
  return (await ingestFor(db, consumerName)(event)).inserted;
}

async function clear(): Promise<void> {
  await db.sql`delete from integration.consumer_inbox`;
  await db.sql`delete from integration.consumed_events`;
  await db.sql`delete from integration.consumer_raw_poison`;
}

const finished = (spec: InboxRowSpec = {}): InboxRowSpec => ({
  status: 'PROCESSED',
  headers: { traceparent: '00-abc' },
  ...spec,
});

describe('reaper: retention', () => {
  it('moves finished rows out of the inbox after the payload retention only, keeping their key and final facts', async () => {
    await clear();
    const old = await insertInboxRow(db.sql, finished());
    const oldIgnored = await insertInboxRow(db.sql, finished({ status: 'IGNORED' }));
    const recent = await insertInboxRow(db.sql, finished());
    // The default payload retention is two days.
    await age(old.inbox_id, 3);
    await age(oldIgnored.inbox_id, 3);
    await age(recent.inbox_id, 1);
    await db.sql`update integration.consumer_inbox set quarantined_at = now() - interval '4 days', error_code = 'OPERATOR_RESOLVED'
                 where inbox_id = ${oldIgnored.inbox_id}`;

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result).toMatchObject({ payloadsPurged: 2, purged: 0 });
    expect(await find(old.inbox_id)).toBeUndefined();
    expect(await find(oldIgnored.inbox_id)).toBeUndefined();
    expect(await keyOf(old.inbox_id)).toMatchObject({ status: 'PROCESSED', quarantined_at: null, error_code: null, window_days: 30 });
    expect(await keyOf(oldIgnored.inbox_id)).toMatchObject({
      status: 'IGNORED',
      quarantined_at: expect.any(Date),
      error_code: 'OPERATOR_RESOLVED',
      window_days: 30,
    });
    expect(await find(recent.inbox_id)).toMatchObject({
      status: 'PROCESSED',
      payload: expect.objectContaining({ caseId: expect.any(String) }),
    });
    expect(await keyOf(recent.inbox_id)).toBeUndefined();
  });

  it('keeps the dedupe key after the row is gone: a redelivered old event is still a duplicate', async () => {
    await clear();
    const row = await insertInboxRow(db.sql, finished({ eventId: 'evt-old-redelivered' }));
    await age(row.inbox_id, 20);
    await reap(db.as(DatabaseRoles.reaper));
    expect(await find(row.inbox_id)).toBeUndefined();

    expect(await redeliver('case-projection', 'evt-old-redelivered')).toBe(0);
    const [n] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from integration.consumer_inbox where event_id = 'evt-old-redelivered'`;
    expect(n!.n).toBe(0);
    expect(await keyOf(row.inbox_id)).toMatchObject({ status: 'PROCESSED' });
  });

  it('forgets keys past the dedupe window, and keeps none for a row that leaves after it', async () => {
    await clear();
    const [pastKept, pastNeverMoved, insideWindow] = await insertInboxRows(db.sql, [
      finished({ eventId: 'evt-past' }),
      finished({ eventId: 'evt-past-unmoved' }),
      finished({ eventId: 'evt-inside' }),
    ]);
    await age(pastKept!.inbox_id, 29);
    await age(insideWindow!.inbox_id, 29);
    await reap(db.as(DatabaseRoles.reaper));
    // Two days later for the first key; the reaper was down for 45 days for the second row.
    await db.sql`update integration.consumed_events set processed_at = processed_at - interval '2 days',
                 dedupe_until = dedupe_until - interval '2 days' where inbox_id = ${pastKept!.inbox_id}`;
    await age(pastNeverMoved!.inbox_id, 45);

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result).toMatchObject({ purged: 2, payloadsPurged: 1 });
    expect(await keyOf(pastKept!.inbox_id)).toBeUndefined();
    expect(await find(pastNeverMoved!.inbox_id)).toBeUndefined();
    expect(await keyOf(pastNeverMoved!.inbox_id)).toBeUndefined();
    expect(await keyOf(insideWindow!.inbox_id)).toMatchObject({ status: 'PROCESSED' });
    // Past the window the key is forgotten: this is the boundary the window must cover.
    expect(await redeliver('case-projection', 'evt-past')).toBe(1);
    expect(await redeliver('case-projection', 'evt-past-unmoved')).toBe(1);
    expect(await redeliver('case-projection', 'evt-inside')).toBe(0);
  });

  it('never moves QUARANTINED, queued or in-flight rows, however old', async () => {
    await clear();
    const rows = await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
      { status: 'RECEIVED' },
      { status: 'RETRY_PENDING', nextAttemptInSeconds: 60 },
      { status: 'PROCESSING' },
    ]);
    await db.sql`
      update integration.consumer_inbox
      set received_at = now() - interval '400 days',
          quarantined_at = case when status = 'QUARANTINED' then now() - interval '400 days' end`;

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result).toMatchObject({ purged: 0, payloadsPurged: 0 });
    expect(await db.sql`select 1 from integration.consumed_events`).toHaveLength(0);
    for (const r of rows) {
      expect(await find(r.inbox_id)).toMatchObject({ status: r.status, payload: expect.objectContaining({ caseId: expect.any(String) }) });
    }
  });

  it('deletes poison rows after their window', async () => {
    await clear();
    const old = await insertPoisonRow(db.sql, { createdSecondsAgo: 31 * DAY });
    const kept = await insertPoisonRow(db.sql, { createdSecondsAgo: 29 * DAY });

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result.purged).toBe(1);
    const left = await db.sql<{ poison_id: string }[]>`select poison_id from integration.consumer_raw_poison`;
    expect(left.map((r) => r.poison_id)).toEqual([kept.poison_id]);
    expect(left.map((r) => r.poison_id)).not.toContain(old.poison_id);
  });

  it("follows each consumer's own policy, in batches", async () => {
    await clear();
    const shortLived: ConsumerDeclaration[] = CONSUMERS.map((c) =>
      c.name === 'case-sla' ? { ...c, retention: { payloadRetentionDays: 1, dedupeWindowDays: 3, poisonRetentionDays: 2 } } : c,
    );
    const sla = await insertInboxRows(
      db.sql,
      Array.from({ length: 5 }, () => finished({ consumerName: 'case-sla' })),
    );
    const projection = await insertInboxRows(
      db.sql,
      Array.from({ length: 3 }, () => finished()),
    );
    // case-sla's rows are past its one-day retention, case-projection's inside the default two days.
    for (const r of sla) await age(r.inbox_id, 2);
    for (const r of projection) await age(r.inbox_id, 1);
    await insertPoisonRow(db.sql, { consumerName: 'case-sla', createdSecondsAgo: 3 * DAY });
    await insertPoisonRow(db.sql, { consumerName: 'case-projection', createdSecondsAgo: 3 * DAY });

    const result = await reap(db.as(DatabaseRoles.reaper), {
      consumers: shortLived,
      config: { reaper: { batchSize: 2, safetyMarginMs: 0 } },
    });

    expect(result).toMatchObject({ payloadsPurged: 5, purged: 1, complete: true });
    const inInbox = await db.sql<{ consumer_name: string; n: number }[]>`
      select consumer_name, count(*)::int as n from integration.consumer_inbox group by consumer_name order by consumer_name`;
    expect(inInbox).toEqual([{ consumer_name: 'case-projection', n: 3 }]);
    const keys = await db.sql<{ consumer_name: string; n: number; window_days: number }[]>`
      select consumer_name, count(*)::int as n,
             max(round(extract(epoch from dedupe_until - processed_at)::numeric / 86400, 3))::float8 as window_days
      from integration.consumed_events group by consumer_name`;
    expect(keys).toEqual([{ consumer_name: 'case-sla', n: 5, window_days: 3 }]);
    const poison = await db.sql<{ consumer_name: string }[]>`select consumer_name from integration.consumer_raw_poison`;
    expect(poison.map((p) => p.consumer_name)).toEqual(['case-projection']);
  });
});
