/**
 * notification-service, the inline example consumer, tested as its author would: on the
 * public test kit (testing/index.ts), through its real ingest and worker, as its own roles.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { notificationService } from '../../../functions/consumers/notification-service';
import { useTestInbox } from '../../../testing';
import { pauseConsumer } from '../../helpers/factories';

const inbox = await useTestInbox({ reset: true });
const notifications = inbox.consumer(notificationService);

const ORG = '0b7f3f9e-8a9c-4c43-9a51-2f3a1f1f5e11';
/** payment-service's event ids are UUIDs: p(n) is the n-th of this file's. */
const IDS = Array.from({ length: 7 }, (_, n) => `00000000-0000-4000-8000-00000000000${n}`);
const p = (n: number) => IDS[n]!;

function paymentCompleted(eventId: string = randomUUID(), overrides: Record<string, unknown> = {}) {
  return {
    event_id: eventId,
    event_type: 'payment.completed',
    event_version: 1,
    org_id: ORG,
    aggregate_id: randomUUID(),
    occurred_at: '2026-07-03T09:15:30Z',
    payload: { amount: 1250, currency: 'EUR' },
    ...overrides,
  };
}

const jobs = () =>
  inbox.sql<{ organization_id: string; channel: string; source_event_id: string }[]>`
    select organization_id, channel, source_event_id from public.notification_jobs order by source_event_id`;

describe('notification-service', () => {
  it('queues one email job per completed payment, in the ingest transaction', async () => {
    const report = await notifications.deliver([paymentCompleted(p(1)), paymentCompleted(p(2))]);

    expect(report).toMatchObject({ inserted: 2, processed: 2, quarantined: 0 });
    expect((await notifications.rows()).map((r) => [r.eventId, r.status])).toEqual([
      [p(1), 'PROCESSED'],
      [p(2), 'PROCESSED'],
    ]);
    expect(await jobs()).toEqual([
      { organization_id: ORG, channel: 'email', source_event_id: p(1) },
      { organization_id: ORG, channel: 'email', source_event_id: p(2) },
    ]);
  });

  it('queues no second job for a redelivered payment', async () => {
    const payment = paymentCompleted(p(3));
    await notifications.deliver([payment]);
    expect(await notifications.deliver([payment])).toMatchObject({ inserted: 0, duplicates: 1, processed: 0 });
    expect(await jobs()).toHaveLength(1);
  });

  it('quarantines a payment without org_id as TENANT_MISSING and queues nothing', async () => {
    const report = await notifications.deliver([paymentCompleted(p(4), { org_id: undefined })]);

    expect(report).toMatchObject({ inserted: 1, quarantined: 1 });
    expect(await notifications.rows()).toMatchObject([{ eventId: p(4), status: 'QUARANTINED', errorCode: 'TENANT_MISSING' }]);
    expect(await jobs()).toEqual([]);
  });

  it('the worker finishes rows the inline path left to it (here: stored while paused)', async () => {
    const aggregate = randomUUID();
    // Paused, the ingest stores them without processing them: the worker's after the resume.
    await pauseConsumer(inbox.sql, notificationService.name);
    await notifications.deliver([paymentCompleted(p(5), { aggregate_id: aggregate }), paymentCompleted(p(6), { aggregate_id: aggregate })]);
    expect((await notifications.rows()).map((r) => r.status)).toEqual(['RECEIVED', 'RECEIVED']);
    await inbox.sql`delete from integration.consumer_pause`;

    expect(await notifications.work()).toMatchObject({ processed: 2 });
    expect((await jobs()).map((j) => j.source_event_id)).toEqual([p(5), p(6)]);
  });
});
