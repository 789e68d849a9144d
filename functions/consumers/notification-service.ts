/**
 * notification-service: one email job per completed payment (the payments inbox design). Runs inline, in
 * the ingest transaction; rows the inline path could not finish go to the worker.
 */
import { z } from 'zod';
import { NonRetryableError, defineHandler, DEFAULT_RETENTION, DEFAULT_RETRY, type ConsumerDeclaration } from '../framework';

export const PAYMENT_COMPLETED = 'payment.completed';

const paymentCompleted = defineHandler({
  payload: z.record(z.string(), z.unknown()),
  async handle(tx, event) {
    if (event.tenantId === null) {
      throw new NonRetryableError('TENANT_MISSING', 'payment.completed carries no org_id');
    }
    // organization_id is notification_jobs' own name; org_id is payment-service's.
    // This is the one place where the two vocabularies meet.
    const organizationId = event.tenantId;
    await tx`
      insert into public.notification_jobs (organization_id, channel, payload, source_event_id)
      values (${organizationId}, 'email', ${tx.json(event.payload as never)}, ${event.eventId})`;
  },
});

export const notificationService: ConsumerDeclaration = {
  name: 'notification-service',
  topics: [PAYMENT_COMPLETED],
  dialect: 'snake_case',
  mode: 'inline',
  envelopeDefaults: { aggregateType: 'payment', producer: 'payment-service' },
  handlers: {
    [PAYMENT_COMPLETED]: { 1: paymentCompleted },
  },
  retry: DEFAULT_RETRY,
  retention: DEFAULT_RETENTION,
  tables: {
    'public.notification_jobs': { insert: true },
  },
};
