/**
 * The ops read commands stay index probes when the inbox holds a month of history: with
 * the plan checks' history (test/helpers/plans.ts, 50,000 finished rows), EXPLAIN of the
 * statements that `ops event` and the received window of `ops stats` send shows no
 * sequential scan of the inbox or the poison table.
 */
import { beforeAll, describe, it } from 'vitest';
import { findConsumedEvents, findEventPoison, findEventRows } from '../../../functions/ops/queries/find-event';
import { receivedSince } from '../../../functions/ops/queries/stats';
import { DEFAULT_RETENTION } from '../../../functions/framework/types';
import { useTestDatabase } from '../../helpers/db';
import { arrangeHistory, expectIndexOnly } from '../../helpers/plans';

const db = await useTestDatabase();
const CONSUMERS = ['case-projection', 'case-sla', 'notification-service'];

describe('ops reads: query plans with a large history', () => {
  beforeAll(() => arrangeHistory(db.sql));

  it('event by id across consumers: the dedupe key, and the aggregate index for its position', async () => {
    await expectIndexOnly(db, (sql) => findEventRows(sql, { consumerNames: CONSUMERS, eventId: 'evt_hist_4242' }, false), [
      'consumer_inbox_unique_event_per_consumer_uk',
      'consumer_inbox_aggregate_idx',
    ]);
  });

  it('event by id once the row left the inbox: the kept keys by their primary key', async () => {
    await expectIndexOnly(db, (sql) => findConsumedEvents(sql, CONSUMERS, 'evt_left_4242'), ['consumed_events_pk']);
  });

  it('event by offset: the topic/offset index; its poison rows: the offset key and the resolved-row index', async () => {
    await expectIndexOnly(
      db,
      async (sql) => {
        await findEventRows(sql, { topic: 'regulatory.case.events.v1', partition: 0, offset: 4242 }, false);
        await findEventPoison(
          sql,
          CONSUMERS.map((consumerName) => ({ consumerName, topic: 'regulatory.case.events.v1', partition: 0, offset: 4242 })),
          ['00000000-0000-4000-8000-000000000000'],
        );
      },
      ['consumer_inbox_topic_offset_idx', 'consumer_raw_poison_offset_uk', 'consumer_raw_poison_resolved_inbox_idx'],
    );
  });

  it("stats' received window: each status through its own partial index", async () => {
    await expectIndexOnly(db, (sql) => receivedSince(sql, CONSUMERS, { seconds: 3600 }, DEFAULT_RETENTION.payloadRetentionDays), [
      'consumer_inbox_finished_idx',
      'consumer_inbox_quarantine_idx',
    ]);
  });
});
