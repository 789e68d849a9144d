/**
 * How a consumer declares its handlers: defineHandler for one event at a time,
 * defineBatchHandler for a handler that can also apply a batch in one set-based statement.
 * Both tie the payload's type to its zod schema.
 */
import type { z } from 'zod';
import type { TransactionSql } from '../lib/db';
import type { EventHandler, HandlerContext, InboxEvent } from './types';

/** Keep the payload type of a handler tied to its schema. */
export function defineHandler<S extends z.ZodType>(handler: {
  payload: S;
  handle(tx: TransactionSql, event: InboxEvent<z.output<S>>, context: HandlerContext): Promise<void>;
}): EventHandler<z.output<S>> {
  return handler as EventHandler<z.output<S>>;
}

/**
 * A handler that can also apply many events in one set-based statement. The worker uses
 * handleBatch for the events of one claimed batch (at most one per aggregate) on its fast
 * path; if anything in the batch fails it runs handleBatch again on halves of the batch's
 * lanes, and handle() per event, each in its own savepoint, for a lane that fails on its own.
 * So handleBatch(events) must have exactly the effect of handle() per event.
 */
export interface BatchEventHandler<P = unknown> extends EventHandler<P> {
  handleBatch(tx: TransactionSql, events: readonly InboxEvent<P>[], context: HandlerContext): Promise<void>;
}

/** Declare a set-based handler; handle(e) is handleBatch([e]), so the two cannot drift apart. */
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
