/**
 * Inline processing keeps per-aggregate order (docs/design.md §3, guarantee 4) as the
 * worker does. A new row is
 * processed in the ingest transaction only when nothing else of its aggregate is waiting
 * or in flight; otherwise it is stored RECEIVED and the worker's claim serializes it.
 */
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CONSUMERS } from '../../../functions/consumers/index';
import { notificationService } from '../../../functions/consumers/notification-service';
import { defineHandler, type ConsumerDeclaration } from '../../../functions/framework';
import { ingestRoleOf } from '../../../functions/lib/database-roles';
import { RetryableError } from '../../../functions/lib/errors';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow } from '../../helpers/factories';
import { ingestFor, PAYMENT_TOPIC, paymentCompleted, truncateAll } from './support';

const db = await useTestDatabase();
const sql = db.sql;

await sql`create table public.inline_applied (seq bigserial primary key, event_id text not null)`;

beforeEach(async () => {
  await truncateAll(sql);
  await sql`truncate public.inline_applied`;
});

const NAME = 'inline-order';

/** notification-service's dialect and mode; records the order it ran in; fails events asked to. */
const recording: ConsumerDeclaration = {
  ...notificationService,
  name: NAME,
  handlers: {
    'payment.completed': {
      1: defineHandler({
        payload: z.object({ fail: z.boolean().optional() }).passthrough(),
        async handle(tx, e) {
          if (e.payload.fail === true) throw new RetryableError('SMTP_DOWN', 'mail relay unavailable');
          await tx`insert into public.inline_applied (event_id) values (${e.eventId})`;
        },
      }),
    },
  },
  tables: { 'public.inline_applied': { insert: true } },
};
// The test consumer's own roles, as the migration step provisions a declared consumer's:
// its ingest role gets the table its declaration names (and the table's sequence).
await db.provision([...CONSUMERS, recording]);
await sql`grant usage on sequence public.inline_applied_seq_seq to ${sql(ingestRoleOf(recording))}`;

async function statusOf(eventId: string): Promise<{ status: string; attempt_count: number; locked_by: string | null }> {
  const [row] = await sql<{ status: string; attempt_count: number; locked_by: string | null }[]>`
    select status, attempt_count, locked_by from integration.consumer_inbox where consumer_name = ${NAME} and event_id = ${eventId}`;
  return row!;
}

async function applied(): Promise<string[]> {
  return (await sql<{ event_id: string }[]>`select event_id from public.inline_applied order by seq`).map((r) => r.event_id);
}

describe('inline processing and the aggregate', () => {
  it('does not process a row while an earlier row of its aggregate is in a worker batch', async () => {
    const aggregate = randomUUID();
    const inFlight = await insertInboxRow(sql, {
      consumerName: NAME,
      aggregateType: 'payment',
      aggregateId: aggregate,
      status: 'PROCESSING',
      attemptCount: 1,
      lockedBy: 'worker:busy',
    });
    const next = paymentCompleted(undefined, { aggregate_id: aggregate });

    const report = await ingestFor(db, recording)(mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 1, value: next })]));

    expect(report).toMatchObject({ inserted: 1, processed: 0, response: { batchItemFailures: [] } });
    expect(await applied()).toEqual([]);
    expect(await statusOf(next.event_id)).toEqual({ status: 'RECEIVED', attempt_count: 0, locked_by: null });
    expect(await statusOf(inFlight.event_id)).toMatchObject({ status: 'PROCESSING', locked_by: 'worker:busy' });
  });

  it('does not let a row overtake an earlier row of its aggregate that is backing off', async () => {
    const aggregate = randomUUID();
    const first = paymentCompleted(undefined, { aggregate_id: aggregate, payload: { fail: true } });
    const second = paymentCompleted(undefined, { aggregate_id: aggregate });
    const ingest = ingestFor(db, recording);

    await ingest(mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 1, value: first })]));
    const report = await ingest(mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 2, value: second })]));

    expect(await statusOf(first.event_id)).toMatchObject({ status: 'RETRY_PENDING', attempt_count: 1 });
    expect(report).toMatchObject({ inserted: 1, processed: 0 });
    expect(await statusOf(second.event_id)).toEqual({ status: 'RECEIVED', attempt_count: 0, locked_by: null });
    expect(await applied()).toEqual([]);
  });

  it('processes only the first row of an aggregate in a batch, by offset; the rest wait for the worker', async () => {
    const aggregate = randomUUID();
    // Event ids sort against the offsets: the insert orders rows by event_id.
    const events = ['f', 'a'].map((c) => paymentCompleted(`${c.repeat(8)}-0000-4000-8000-000000000000`, { aggregate_id: aggregate }));
    const other = paymentCompleted();
    const event = mskEvent([
      ...events.map((value, i) => mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 10 + i, value })),
      mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 12, value: other }),
    ]);

    const report = await ingestFor(db, recording)(event);

    expect(report).toMatchObject({ inserted: 3, processed: 2, response: { batchItemFailures: [] } });
    expect((await applied()).sort()).toEqual([events[0]!.event_id, other.event_id].sort());
    expect(await statusOf(events[1]!.event_id)).toEqual({ status: 'RECEIVED', attempt_count: 0, locked_by: null });
  });
});
