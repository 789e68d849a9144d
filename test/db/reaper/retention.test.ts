import { describe, expect, it } from 'vitest';
import { CONSUMERS } from '../../../functions/consumers/index';
import type { ConsumerDeclaration } from '../../../functions/consumers/types';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow, insertInboxRows, insertPoisonRow, type InboxRowSpec } from '../../helpers/factories';
import { reap } from './support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const DAY = 86_400;

/** Age a finished row: it finished `processedDaysAgo` and (optionally) lost its payload `purgedDaysAgo`. */
async function age(inboxId: string, processedDaysAgo: number, purgedDaysAgo: number | null = null): Promise<void> {
  await db.sql`
    update integration.consumer_inbox
    set received_at = now() - make_interval(days => ${processedDaysAgo}) - interval '1 minute',
        processed_at = now() - make_interval(days => ${processedDaysAgo}),
        payload_purged_at = case when ${purgedDaysAgo}::int is null then null
                                 else now() - make_interval(days => ${purgedDaysAgo}::int) end,
        payload = case when ${purgedDaysAgo}::int is null then payload else '{}'::jsonb end
    where inbox_id = ${inboxId}`;
}

interface RetainedRow {
  inbox_id: string;
  status: string;
  payload: Record<string, unknown>;
  headers: Record<string, unknown>;
  error_detail: unknown;
  payload_purged_at: Date | null;
}

async function find(inboxId: string): Promise<RetainedRow | undefined> {
  const [r] = await db.sql<RetainedRow[]>`
    select inbox_id, status, payload, headers, error_detail, payload_purged_at
    from integration.consumer_inbox where inbox_id = ${inboxId}`;
  return r;
}

/** A redelivery as the ingest function stores it: insert if absent on the dedupe key. */
async function redeliver(consumerName: string, eventId: string): Promise<number> {
  const inserted = await db.sql`
    insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type,
      aggregate_id, topic_name, partition_no, offset_no, producer, occurred_at, status, payload)
    values (${consumerName}, ${eventId}, 'regulatory.case.accepted.v1', 1, 'case', 'case_1',
      'regulatory.case.events.v1', 0, 1, 'case-command-service', now(), 'RECEIVED', '{"caseId":"case_1"}')
    on conflict (consumer_name, event_id) do nothing
    returning inbox_id`;
  return inserted.length;
}

async function clear(): Promise<void> {
  await db.sql`delete from integration.consumer_inbox`;
  await db.sql`delete from integration.consumer_raw_poison`;
}

const finished = (spec: InboxRowSpec = {}): InboxRowSpec => ({
  status: 'PROCESSED',
  headers: { traceparent: '00-abc' },
  ...spec,
});

describe('reaper: retention', () => {
  it('drops the payload, headers and error detail of finished rows after the payload retention only', async () => {
    await clear();
    const old = await insertInboxRow(db.sql, finished());
    const oldIgnored = await insertInboxRow(db.sql, finished({ status: 'IGNORED' }));
    const recent = await insertInboxRow(db.sql, finished());
    await age(old.inbox_id, 8);
    await age(oldIgnored.inbox_id, 8);
    await age(recent.inbox_id, 6);
    await db.sql`update integration.consumer_inbox set error_detail = '{"attempt": 2}' where inbox_id = ${old.inbox_id}`;

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result).toMatchObject({ payloadsPurged: 2, purged: 0 });
    for (const id of [old.inbox_id, oldIgnored.inbox_id]) {
      const r = await find(id);
      expect(r).toMatchObject({ payload: {}, headers: {}, error_detail: null });
      expect(r!.payload_purged_at).toBeInstanceOf(Date);
    }
    expect(await find(recent.inbox_id)).toMatchObject({
      payload: expect.objectContaining({ caseId: expect.any(String) }),
      headers: { traceparent: '00-abc' },
      payload_purged_at: null,
    });
  });

  it('keeps the dedupe key after the payload is gone: a redelivered old event is still a duplicate', async () => {
    await clear();
    const row = await insertInboxRow(db.sql, finished({ eventId: 'evt-old-redelivered' }));
    await age(row.inbox_id, 20);
    await reap(db.as(DatabaseRoles.reaper));
    expect((await find(row.inbox_id))?.payload_purged_at).toBeInstanceOf(Date);

    expect(await redeliver('case-projection', 'evt-old-redelivered')).toBe(0);
    const [n] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from integration.consumer_inbox where event_id = 'evt-old-redelivered'`;
    expect(n!.n).toBe(1);
    expect(await find(row.inbox_id)).toMatchObject({ status: 'PROCESSED', payload: {} });
  });

  it('deletes finished rows past the dedupe window, purged or not, and keeps the rest', async () => {
    await clear();
    const [pastPurged, pastNeverPurged, insideWindow] = await insertInboxRows(db.sql, [
      finished({ eventId: 'evt-past' }),
      finished({ eventId: 'evt-past-unpurged' }),
      finished({ eventId: 'evt-inside' }),
    ]);
    await age(pastPurged!.inbox_id, 31, 24);
    // The reaper was down: past the window and never purged.
    await age(pastNeverPurged!.inbox_id, 45);
    await age(insideWindow!.inbox_id, 29, 22);

    const result = await reap(db.as(DatabaseRoles.reaper));

    expect(result.purged).toBe(2);
    expect(await find(pastPurged!.inbox_id)).toBeUndefined();
    expect(await find(pastNeverPurged!.inbox_id)).toBeUndefined();
    expect(await find(insideWindow!.inbox_id)).toMatchObject({ status: 'PROCESSED' });
    // Past the window the key is forgotten: this is the boundary the window must cover.
    expect(await redeliver('case-projection', 'evt-past')).toBe(1);
    expect(await redeliver('case-projection', 'evt-inside')).toBe(0);
  });

  it('never purges QUARANTINED, queued or in-flight rows, however old', async () => {
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
    const sla = await insertInboxRows(db.sql, Array.from({ length: 5 }, () => finished({ consumerName: 'case-sla' })));
    const projection = await insertInboxRows(db.sql, Array.from({ length: 3 }, () => finished()));
    for (const r of [...sla, ...projection]) await age(r.inbox_id, 2);
    await insertPoisonRow(db.sql, { consumerName: 'case-sla', createdSecondsAgo: 3 * DAY });
    await insertPoisonRow(db.sql, { consumerName: 'case-projection', createdSecondsAgo: 3 * DAY });

    const result = await reap(db.as(DatabaseRoles.reaper), { consumers: shortLived, config: { reaper: { batchSize: 2, safetyMarginMs: 0 } } });

    expect(result).toMatchObject({ payloadsPurged: 5, purged: 1, complete: true });
    const byConsumer = await db.sql<{ consumer_name: string; purged: number; kept: number }[]>`
      select consumer_name,
             count(*) filter (where payload_purged_at is not null)::int as purged,
             count(*) filter (where payload_purged_at is null)::int as kept
      from integration.consumer_inbox group by consumer_name order by consumer_name`;
    expect(byConsumer).toEqual([
      { consumer_name: 'case-projection', purged: 0, kept: 3 },
      { consumer_name: 'case-sla', purged: 5, kept: 0 },
    ]);
    const poison = await db.sql<{ consumer_name: string }[]>`select consumer_name from integration.consumer_raw_poison`;
    expect(poison.map((p) => p.consumer_name)).toEqual(['case-projection']);
  });
});
