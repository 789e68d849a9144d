import { describe, expect, it } from 'vitest';
import { LANE_KEY_COLUMNS } from '../../../functions/inbox/claim-due';
import { LANE_KEY_COLLATION } from '../../../functions/lib/lane-key';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow } from '../../helpers/factories';

const db = await useTestDatabase();

async function indexDef(name: string): Promise<string | undefined> {
  const [row] = await db.sql<{ def: string }[]>`select pg_get_indexdef(to_regclass(${`integration.${name}`})) as def`;
  return row?.def ?? undefined;
}

describe('integration.consumer_inbox', () => {
  it('has the case inbox design’s unique key on (consumer_name, event_id)', async () => {
    const [uk] = await db.sql<{ def: string }[]>`
      select pg_get_constraintdef(oid) as def from pg_constraint
      where conname = 'consumer_inbox_unique_event_per_consumer_uk'`;
    expect(uk?.def).toBe('UNIQUE (consumer_name, event_id)');

    await insertInboxRow(db.sql, { consumerName: 'case-projection', eventId: 'evt-uk' });
    await insertInboxRow(db.sql, { consumerName: 'case-sla', eventId: 'evt-uk' });
    await expect(insertInboxRow(db.sql, { consumerName: 'case-sla', eventId: 'evt-uk' })).rejects.toMatchObject({
      code: '23505',
      constraint_name: 'consumer_inbox_unique_event_per_consumer_uk',
    });
  });

  it('checks status, attempt count and event version', async () => {
    await expect(insertInboxRow(db.sql, { status: 'DONE' as never })).rejects.toMatchObject({
      code: '23514',
      constraint_name: 'consumer_inbox_status_ck',
    });
    await expect(insertInboxRow(db.sql, { attemptCount: -1 })).rejects.toMatchObject({
      code: '23514',
      constraint_name: 'consumer_inbox_attempt_ck',
    });
    await expect(insertInboxRow(db.sql, { eventVersion: 0 })).rejects.toMatchObject({
      code: '23514',
      constraint_name: 'consumer_inbox_event_version_ck',
    });
  });

  it('refuses a PROCESSING row without a lease owner', async () => {
    await expect(
      db.sql`update integration.consumer_inbox set status = 'PROCESSING', locked_by = null
             where inbox_id = ${(await insertInboxRow(db.sql)).inbox_id}`,
    ).rejects.toMatchObject({ code: '23514', constraint_name: 'consumer_inbox_lease_ck' });
  });

  it('has the case inbox design’s partial indexes', async () => {
    expect(await indexDef('consumer_inbox_retry_idx')).toMatch(
      /\(consumer_name, status, next_attempt_at, received_at\) WHERE \(status = ANY \(ARRAY\['RECEIVED'::text, 'RETRY_PENDING'::text\]\)\)/,
    );
    expect(await indexDef('consumer_inbox_quarantine_idx')).toMatch(
      /\(consumer_name, quarantined_at DESC\) WHERE \(status = 'QUARANTINED'::text\)/,
    );
    expect(await indexDef('consumer_inbox_aggregate_idx')).toMatch(/\(aggregate_type, aggregate_id, received_at DESC\)$/);
    expect(await indexDef('consumer_inbox_topic_offset_idx')).toMatch(/\(topic_name, partition_no, offset_no\)$/);
  });
});

describe('integration.consumer_raw_poison', () => {
  it('is unique per consumer, topic, partition and offset', async () => {
    const [uk] = await db.sql<{ def: string }[]>`
      select pg_get_constraintdef(oid) as def from pg_constraint where conname = 'consumer_raw_poison_offset_uk'`;
    expect(uk?.def).toBe('UNIQUE (consumer_name, topic_name, partition_no, offset_no)');
  });
});

describe('domain tables', () => {
  it('case_summary tracks the last applied aggregate version, defaulting to 0', async () => {
    await db.sql`insert into read_model.case_summary (case_id, case_status) values ('c1', 'ACCEPTED')`;
    const [row] = await db.sql`select last_aggregate_version from read_model.case_summary where case_id = 'c1'`;
    expect(row).toEqual({ last_aggregate_version: 0 });
  });

  it('sla_obligation allows one open obligation per case and type, and a new one after cancellation', async () => {
    const insert = () => db.sql`
      insert into case_core.sla_obligation (case_id, obligation_type, due_at, source_event_id, status)
      values ('c2', 'INITIAL_ASSESSMENT_DUE', now(), 'e1', 'OPEN')`;
    await insert();
    await expect(insert()).rejects.toMatchObject({ code: '23505', constraint_name: 'sla_obligation_case_type_uk' });
    await db.sql`update case_core.sla_obligation set cancelled_at = now(), status = 'CANCELLED' where case_id = 'c2'`;
    await insert();
    const [n] = await db.sql`select count(*)::int as n from case_core.sla_obligation where case_id = 'c2'`;
    expect(n).toEqual({ n: 2 });
  });

  it('notification_jobs has organization_id and one job per source event', async () => {
    const insert = () => db.sql`
      insert into public.notification_jobs (organization_id, channel, payload, source_event_id)
      values (gen_random_uuid(), 'email', '{}'::jsonb, 'pay-1')`;
    await insert();
    await expect(insert()).rejects.toMatchObject({ code: '23505' });
  });
});

describe('the lane key', () => {
  it("leads the claim's lane indexes, column for column", async () => {
    const rows = await db.sql<{ indexname: string; indexdef: string }[]>`
      select indexname, indexdef from pg_indexes
      where schemaname = 'integration' and indexname in ('consumer_inbox_open_lane_idx', 'consumer_inbox_in_flight_lane_idx')
      order by indexname`;

    expect(rows.map((r) => r.indexname)).toEqual(['consumer_inbox_in_flight_lane_idx', 'consumer_inbox_open_lane_idx']);
    const key = LANE_KEY_COLUMNS.map((column) => `${column} COLLATE "${LANE_KEY_COLLATION}"`).join(', ');
    for (const { indexdef } of rows) expect(indexdef).toContain(`USING btree (${key}, `);
  });
});
