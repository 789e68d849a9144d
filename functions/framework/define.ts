/**
 * How a consumer declares its handlers: defineHandler for one event at a time,
 * defineBatchHandler for a handler that can also apply a batch in one set-based statement.
 * Both tie the payload's type to its zod schema.
 */
import type { z } from 'zod';
import type { TransactionSql } from '../lib/db';
import type { EventHandler, HandlerContext, InboxEvent } from './types';

/**
 * Declare a handler of one event at a time: its payload's zod schema, and `handle`, which
 * applies the event's side effects in the transaction that also records the row's new status.
 * The payload type of `handle` is the schema's output, so the two cannot drift apart. A
 * payload the schema refuses is quarantined `PAYLOAD_INVALID` without running `handle`.
 *
 * `handle` must be idempotent with respect to the domain ("insert if absent", not "insert"):
 * the inbox makes a redelivery a duplicate, but an attempt can fail after some statements ran
 * and is then retried. Throw `NonRetryableError` to quarantine the event at once,
 * `AggregateVersionGapError` to wait for a missing version; any other error (a database error
 * included, classified by SQLSTATE) is retried with the consumer's backoff.
 *
 * @example
 * import { z } from 'zod';
 * import { defineHandler, NonRetryableError } from '../framework';
 *
 * export const invoiceIssued = defineHandler({
 *   payload: z.object({ invoiceId: z.string(), amountCents: z.number().int().nonnegative() }),
 *   async handle(tx, event, context) {
 *     if (event.tenantId === null) throw new NonRetryableError('TENANT_MISSING', 'invoice.issued carries no org_id');
 *     await tx`
 *       insert into billing.invoice_projection (invoice_id, organization_id, amount_cents)
 *       values (${event.payload.invoiceId}, ${event.tenantId}, ${event.payload.amountCents})
 *       on conflict (invoice_id) do nothing`;
 *     // Needs the type in the declaration's `emits`; the relay publishes it after the commit.
 *     await context.emit([{ source: event, eventType: 'billing.invoice-projected.v1', aggregateId: event.aggregateId, payload: {} }]);
 *   },
 * });
 */
export function defineHandler<S extends z.ZodType>(handler: {
  payload: S;
  handle(tx: TransactionSql, event: InboxEvent<z.output<S>>, context: HandlerContext): Promise<void>;
}): EventHandler<z.output<S>> {
  return handler as EventHandler<z.output<S>>;
}

/**
 * A handler that can also apply many events in one set-based statement. The worker uses
 * handleBatch for the events of one wave of a claimed batch (at most one per aggregate) on its fast
 * path; if anything in the batch fails it runs handleBatch again on halves of the batch's
 * lanes, and handle() per event, each in its own savepoint, for a lane that fails on its own.
 * So handleBatch(events) must have exactly the effect of handle() per event.
 */
export interface BatchEventHandler<P = unknown> extends EventHandler<P> {
  handleBatch(tx: TransactionSql, events: readonly InboxEvent<P>[], context: HandlerContext): Promise<void>;
}

/**
 * Declare a set-based handler: `handleBatch` applies many events of one type and version in
 * one statement, with exactly the effect of applying each alone (the worker may run it on a
 * whole batch, on halves of it, or on one event). Its `handle(e)` is `handleBatch([e])`, so
 * the two cannot drift apart. The events of one call belong to different aggregates (one row
 * per aggregate per wave); audit and emit what the statement actually changed, as its
 * `returning` tells.
 *
 * @example
 * import { z } from 'zod';
 * import { defineBatchHandler } from '../framework';
 *
 * export const invoicesIssued = defineBatchHandler({
 *   payload: z.object({ invoiceId: z.string(), amountCents: z.number().int().nonnegative() }),
 *   async handleBatch(tx, events, context) {
 *     const rows = events.map((e) => ({ invoice_id: e.payload.invoiceId, amount_cents: e.payload.amountCents }));
 *     const inserted = await tx<{ invoice_id: string }[]>`
 *       insert into billing.invoice_projection (invoice_id, amount_cents)
 *       select invoice_id, amount_cents
 *       from json_to_recordset(${JSON.stringify(rows)}::text::json) as e(invoice_id text, amount_cents bigint)
 *       on conflict do nothing
 *       returning invoice_id`;
 *     const byInvoice = new Map(events.map((e) => [e.payload.invoiceId, e]));
 *     await context.audit(
 *       inserted.map((r) => ({ source: byInvoice.get(r.invoice_id)!, subjectId: r.invoice_id, change: 'INVOICE_ISSUED', after: { status: 'ISSUED' } })),
 *     );
 *   },
 * });
 */
export function defineBatchHandler<S extends z.ZodType>(handler: {
  payload: S;
  handleBatch(tx: TransactionSql, events: readonly InboxEvent<z.output<S>>[], context: HandlerContext): Promise<void>;
}): BatchEventHandler<z.output<S>> {
  return {
    payload: handler.payload as unknown as z.ZodType<z.output<S>>,
    handleBatch: handler.handleBatch,
    handle: (tx, event, context) => handler.handleBatch(tx, [event], context),
  };
}

export function isBatchHandler(handler: EventHandler<any>): handler is BatchEventHandler<any> {
  return typeof (handler as Partial<BatchEventHandler>).handleBatch === 'function';
}
