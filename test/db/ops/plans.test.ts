/**
 * The ops read commands stay index probes when the inbox holds a month of history: with
 * 50,000 finished rows, EXPLAIN of the statements `ops event` and `ops stats`' received
 * window send shows no sequential scan of the inbox or the poison table.
 */
import { beforeAll, describe, it } from 'vitest';
import { findEventPoison, findEventRows } from '../../../functions/inbox/find-event';
import { receivedSince } from '../../../functions/inbox/stats';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { expectIndexOnly } from '../../helpers/plans';

const db = await useTestDatabase();
const CONSUMERS = ['case-projection', 'case-sla', 'notification-service'];

describe('ops reads: query plans with a large history', () => {
  beforeAll(async () => {
    // 50,000 rows finished over the last 29 days (the older ones purged), a backlog, some
    // in flight and quarantined, and 2,000 poison rows.
    await db.sql`
      insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type,
        aggregate_id, topic_name, partition_no, offset_no, producer, occurred_at, received_at, status,
        processed_at, payload_purged_at, payload)
      select 'case-projection', 'evt_hist_' || g, 'regulatory.case.accepted.v1', 1, 'case', 'case_' || (g % 5000),
             'regulatory.case.events.v1', g % 8, g, 'case-command-service', now(), h.at, 'PROCESSED', h.at,
             case when h.at < now() - interval '7 days' then h.at + interval '7 days' end, '{}'
      from generate_series(1, 50000) g
      cross join lateral (select now() - make_interval(secs => g * 50) as at) h`;
    await db.sql`
      insert into integration.consumer_raw_poison (consumer_name, topic_name, partition_no, offset_no, error_message, created_at)
      select 'case-projection', 'regulatory.case.events.v1', 1, 100000 + g, 'not json', now() - make_interval(secs => g * 1000)
      from generate_series(1, 2000) g`;
    await insertInboxRows(db.sql, [
      ...Array.from({ length: 100 }, () => ({ status: 'RECEIVED' as const })),
      ...Array.from({ length: 5 }, () => ({ status: 'PROCESSING' as const })),
      ...Array.from({ length: 5 }, () => ({ status: 'QUARANTINED' as const, errorCode: 'PAYLOAD_INVALID' })),
    ]);
    await db.sql`analyze integration.consumer_inbox`;
    await db.sql`analyze integration.consumer_raw_poison`;
  });

  it('event by id across consumers: the dedupe key, and the aggregate index for its position', async () => {
    await expectIndexOnly(db, (sql) => findEventRows(sql, { consumerNames: CONSUMERS, eventId: 'evt_hist_4242' }, false), [
      'consumer_inbox_unique_event_per_consumer_uk',
      'consumer_inbox_aggregate_idx',
    ]);
  });

  it('event by offset: the topic/offset index; its poison rows: the offset key and the resolved-row index', async () => {
    await expectIndexOnly(
      db,
      async (sql) => {
        await findEventRows(sql, { topic: 'regulatory.case.events.v1', partition: 2, offset: 4242 }, false);
        await findEventPoison(
          sql,
          CONSUMERS.map((consumerName) => ({ consumerName, topic: 'regulatory.case.events.v1', partition: 2, offset: 4242 })),
          ['00000000-0000-4000-8000-000000000000'],
        );
      },
      ['consumer_inbox_topic_offset_idx', 'consumer_raw_poison_offset_uk', 'consumer_raw_poison_resolved_inbox_idx'],
    );
  });

  it("stats' received window: each status through its own partial index", async () => {
    await expectIndexOnly(db, (sql) => receivedSince(sql, CONSUMERS, { seconds: 3600 }), [
      'consumer_inbox_finished_idx',
      'consumer_inbox_quarantine_idx',
    ]);
  });
});
