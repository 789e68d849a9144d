import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { beforeEach, describe, expect, it } from 'vitest';
import { CONSUMERS } from '../../../functions/consumers/index';
import { notificationService } from '../../../functions/consumers/notification-service';
import { defineHandler, type ConsumerDeclaration } from '../../../functions/framework';
import { RetryableError } from '../../../functions/lib/errors';
import { useTestDatabase } from '../../helpers/db';
import { mskEvent, mskRecord, spreadRecords } from '../../../tools/msk-events';
import { ingestFor, ingestRole, PAYMENT_TOPIC, paymentCompleted, truncateAll } from './support';

const db = await useTestDatabase();

beforeEach(() => truncateAll(db.sql));

interface Row {
  event_id: string;
  offset_no: number;
  status: string;
  attempt_count: number;
  locked_by: string | null;
  lease_expires_at: Date | null;
  error_code: string | null;
  next_attempt_at: Date | null;
  tenant_id: string | null;
}

async function rows(): Promise<Row[]> {
  return db.sql<Row[]>`
    select event_id, offset_no, status, attempt_count, locked_by, lease_expires_at, error_code, next_attempt_at, tenant_id
    from integration.consumer_inbox order by partition_no, offset_no`;
}

async function jobs(): Promise<Array<{ organization_id: string; channel: string; source_event_id: string; payload: unknown }>> {
  return db.sql`select organization_id, channel, source_event_id, payload from public.notification_jobs order by source_event_id`;
}

describe('inline mode (notification-service)', () => {
  it('processes new rows in the ingest transaction: one job per event however often it is delivered', async () => {
    const events = Array.from({ length: 12 }, () => paymentCompleted());
    const event = mskEvent(spreadRecords({ topic: PAYMENT_TOPIC, partitions: 3, count: 12, value: (n) => events[n]! }));
    const ingest = ingestFor(db, 'notification-service');
    const otherContainer = ingestFor(db.client({ max: 2, role: ingestRole('notification-service') }), 'notification-service');

    const concurrent = await Promise.all([ingest(event), otherContainer(event)]);
    const later = await ingest(event);

    for (const r of concurrent) expect(r).toMatchObject({ retried: 0, quarantined: 0, response: { batchItemFailures: [] } });
    expect(concurrent[0].inserted + concurrent[1].inserted).toBe(12);
    expect(concurrent[0].processed + concurrent[1].processed).toBe(12);
    expect(later).toMatchObject({ inserted: 0, processed: 0, duplicates: 12 });
    const stored = await rows();
    expect(stored).toHaveLength(12);
    for (const r of stored) {
      // A finished row keeps the lease it finished under (complete.ts); the owner is cleared.
      expect(r).toMatchObject({ status: 'PROCESSED', attempt_count: 1, locked_by: null, lease_expires_at: expect.any(Date) });
    }
    const created = await jobs();
    expect(created.map((j) => j.source_event_id)).toEqual(events.map((e) => e.event_id).sort());
    expect(created[0]).toMatchObject({
      organization_id: '7d1f2c4e-8a9b-4c3d-9e8f-1a2b3c4d5e6f',
      channel: 'email',
      payload: { amount: 1250, currency: 'EUR' },
    });
  });

  it('treats an uppercase event_id as the same event', async () => {
    const id = randomUUID();
    const ingest = ingestFor(db, 'notification-service');

    await ingest(mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 1, value: paymentCompleted(id) })]));
    await ingest(mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 2, value: paymentCompleted(id.toUpperCase()) })]));

    expect(await jobs()).toHaveLength(1);
  });

  it('leaves a row the handler cannot process QUARANTINED for the worker and moves the partition on', async () => {
    const noTenant = paymentCompleted(undefined, { org_id: null });
    const next = paymentCompleted();
    const event = mskEvent([
      mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 10, value: noTenant }),
      mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 11, value: next }),
    ]);
    const ingest = ingestFor(db, 'notification-service');

    const report = await ingest(event);
    const again = await ingest(event);

    expect(report).toMatchObject({ inserted: 2, processed: 1, quarantined: 1, response: { batchItemFailures: [] } });
    expect(again).toMatchObject({ inserted: 0, processed: 0, quarantined: 0, duplicates: 2 });
    expect(await rows()).toMatchObject([
      { event_id: noTenant.event_id, status: 'QUARANTINED', error_code: 'TENANT_MISSING', attempt_count: 1, locked_by: null },
      { event_id: next.event_id, status: 'PROCESSED' },
    ]);
    expect((await jobs()).map((j) => j.source_event_id)).toEqual([next.event_id]);
  });

  it('leaves a row whose handler failed transiently RETRY_PENDING, without a job, for the worker', async () => {
    let calls = 0;
    const flaky: ConsumerDeclaration = {
      ...notificationService,
      name: 'notification-flaky',
      handlers: {
        'payment.completed': {
          1: defineHandler({
            payload: z.record(z.string(), z.unknown()),
            async handle(tx, e) {
              calls++;
              // The write happens, then the failure: the savepoint must undo it.
              await tx`insert into public.notification_jobs (organization_id, channel, payload, source_event_id)
                       values (${e.tenantId}, 'email', '{}', ${e.eventId})`;
              throw new RetryableError('SMTP_DOWN', 'mail relay unavailable');
            },
          }),
        },
      },
    };
    const e = paymentCompleted();
    const event = mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 3, value: e })]);
    // A consumer of the test's own: its roles, as the migration step provisions a declared consumer's.
    await db.provision([...CONSUMERS, flaky]);
    const ingest = ingestFor(db, flaky);

    const report = await ingest(event);
    await ingest(event);

    expect(report).toMatchObject({ inserted: 1, retried: 1, response: { batchItemFailures: [] } });
    expect(calls).toBe(1);
    const [row] = await rows();
    expect(row).toMatchObject({ status: 'RETRY_PENDING', error_code: 'SMTP_DOWN', attempt_count: 1, locked_by: null });
    expect(row!.next_attempt_at).toBeInstanceOf(Date);
    expect(await jobs()).toEqual([]);
  });
});
