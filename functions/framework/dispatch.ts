/**
 * Dispatch an inbox row to its consumer's handler for (eventType, eventVersion).
 *
 * Returns the terminal status on success; throws an InboxError (or lets a database error
 * through) on failure, for the caller to classify with classifyError(). Used by the worker
 * and by the ingest function's inline mode, so both decide outcomes the same way.
 */
import { ErrorCodes, NonRetryableError } from '../lib/errors';
import type { TransactionSql } from '../lib/db';
import type { TraceCarrier } from '../lib/tracing';
import type { InboxRow } from '../inbox/types';
import type { BatchEventHandler } from './define';
import { handlerContext, type AuditBatch } from './handler-context';
import type { ConsumerDeclaration, EventHandler, InboxEvent } from './types';

/**
 * Run a set-based handler on events inside `tx`, with a handler context bound to `tx`
 * (its audit entries collected in `audits` when given). The worker's fast path calls it
 * once per wave and handler.
 */
export function runBatch(
  consumer: ConsumerDeclaration,
  handler: BatchEventHandler<any>,
  tx: TransactionSql,
  events: readonly InboxEvent[],
  audits?: AuditBatch,
): Promise<void> {
  return handler.handleBatch(tx, events, handlerContext(consumer, tx, audits));
}

export type Resolution = { kind: 'handler'; handler: EventHandler } | { kind: 'ignored' };

/** Which handler serves a type@version; throws the quarantine codes when none does. */
export function resolveHandler(consumer: ConsumerDeclaration, eventType: string, eventVersion: number): Resolution {
  const versions = consumer.handlers[eventType];
  if (versions === undefined) {
    if (consumer.ignores?.(eventType)) return { kind: 'ignored' };
    throw new NonRetryableError(ErrorCodes.UNSUPPORTED_EVENT_TYPE, `No handler for event type ${eventType}`, {
      detail: { eventType },
    });
  }
  const handler = versions[eventVersion];
  if (handler === undefined) {
    throw new NonRetryableError(
      ErrorCodes.UNSUPPORTED_EVENT_VERSION,
      `No handler for ${eventType} version ${eventVersion} (handled: ${Object.keys(versions).join(', ')})`,
      { detail: { eventType, eventVersion } },
    );
  }
  return { kind: 'handler', handler };
}

export function toInboxEvent(row: InboxRow, payload: unknown, traceContext: TraceCarrier | null = row.trace_context): InboxEvent {
  return {
    inboxId: row.inbox_id,
    consumerName: row.consumer_name,
    eventId: row.event_id,
    eventType: row.event_type,
    eventVersion: row.event_version,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    aggregateVersion: row.aggregate_version,
    tenantId: row.tenant_id,
    producer: row.producer,
    occurredAt: row.occurred_at,
    correlationId: row.correlation_id,
    causationId: row.causation_id,
    attempt: row.attempt_count,
    payload,
    headers: row.headers ?? {},
    traceContext,
  };
}

/**
 * What a row needs to run: nothing (IGNORED), or its handler bound to the parsed payload;
 * `run(tx, audits?)` gives the handler a context bound to that `tx` (its savepoint).
 */
export type PreparedDispatch =
  | { kind: 'ignored' }
  | { kind: 'run'; run: (tx: TransactionSql, audits?: AuditBatch) => Promise<void>; handler: EventHandler<any>; event: InboxEvent };

/**
 * Resolve the handler and parse the payload, without touching the database. Throws the
 * quarantine errors (UNSUPPORTED_EVENT_TYPE / _VERSION, PAYLOAD_INVALID), so a batch can
 * settle those rows before it opens a savepoint for anything.
 */
export function prepareDispatch(
  consumer: ConsumerDeclaration,
  row: InboxRow,
  traceContext: TraceCarrier | null = row.trace_context,
): PreparedDispatch {
  const resolution = resolveHandler(consumer, row.event_type, row.event_version);
  if (resolution.kind === 'ignored') return { kind: 'ignored' };
  const parsed = resolution.handler.payload.safeParse(row.payload);
  if (!parsed.success) {
    // Issue paths and messages only: never the payload's values.
    const issues = parsed.error.issues.slice(0, 10).map((i) => ({ path: i.path.join('.'), message: i.message }));
    throw new NonRetryableError(ErrorCodes.PAYLOAD_INVALID, `Payload does not match ${row.event_type}@${row.event_version}`, {
      detail: { issues },
    });
  }
  const event = toInboxEvent(row, parsed.data, traceContext);
  const handler = resolution.handler;
  return { kind: 'run', run: (tx, audits) => handler.handle(tx, event, handlerContext(consumer, tx, audits)), handler, event };
}

/** Run the row's handler inside `tx` (its processing span's context: `traceContext`). Resolves to the status to record. */
export async function dispatch(
  consumer: ConsumerDeclaration,
  tx: TransactionSql,
  row: InboxRow,
  traceContext: TraceCarrier | null = row.trace_context,
): Promise<'PROCESSED' | 'IGNORED'> {
  const prepared = prepareDispatch(consumer, row, traceContext);
  if (prepared.kind === 'ignored') return 'IGNORED';
  await prepared.run(tx);
  return 'PROCESSED';
}
