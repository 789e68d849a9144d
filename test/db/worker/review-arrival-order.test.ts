/**
 * Review: unversioned events of one aggregate that arrive in ONE ingest batch share their
 * received_at (the batch's now()). Their order is then the Kafka offset order, and the
 * worker must apply them in it, as it does for events received at different times.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { defineHandler } from '../../../functions/consumers/types';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { CASE_TOPIC, ingestFor } from '../ingest/support';
import { variant, work } from './support';

const db = await useTestDatabase();
const sql = db.sql;

await sql`create table public.note_applied (seq bigserial primary key, aggregate_id text not null, event_id text not null)`;

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, public.note_applied`;
});

const NOTE = 'test.note.v1';

const withNotes = variant(caseProjection, {
  name: 'review-notes',
  handlers: {
    [NOTE]: {
      1: defineHandler({
        payload: z.object({}).passthrough(),
        async handle(tx, event) {
          await tx`insert into public.note_applied (aggregate_id, event_id) values (${event.aggregateId}, ${event.eventId})`;
        },
      }),
    },
  },
});

function note(eventId: string, aggregateId: string) {
  return {
    eventId,
    eventType: NOTE,
    eventVersion: 1,
    occurredAt: '2026-07-03T09:15:30Z',
    producer: 'review',
    aggregateType: 'case',
    aggregateId,
    payload: {},
  };
}

describe('arrival order within one ingest batch', () => {
  it('applies unversioned events of one aggregate in offset order, whatever their event ids', async () => {
    // Event ids sort against the offsets: the insert orders rows by event_id.
    const ids = ['evt_z', 'evt_m', 'evt_a'];
    const event = mskEvent(ids.map((id, i) => mskRecord({ topic: CASE_TOPIC, partition: 0, offset: 100 + i, value: note(id, 'agg_one') })));
    const stored = await ingestFor(sql, withNotes)(event);
    expect(stored).toMatchObject({ inserted: 3, response: { batchItemFailures: [] } });

    expect(await work(sql, withNotes)).toMatchObject({ claimed: 3, processed: 3 });

    const applied = await sql<{ event_id: string }[]>`select event_id from public.note_applied order by seq`;
    expect(applied.map((a) => a.event_id)).toEqual(ids);
  });
});
