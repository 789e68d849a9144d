/**
 * The HandlerContext a handler gets with its transaction (types.ts): audit and emit, bound
 * to the consumer and to that very transaction or savepoint, so what they write commits
 * with the handler's side effects and the row's status, and a rolled-back attempt (its
 * savepoint, on the worker's fast or slow path, or inline) takes it all back.
 *
 * A context serves one attempt: the fast path's and the slow path's calls of the same row
 * each get their own, so ordinals count from 0 on every attempt and a retried row derives
 * the same event ids again.
 *
 * Audit entries may be collected instead of written at once (AuditBatch): the worker's fast
 * path writes the entries of all its waves in one statement after the last, inside the
 * same savepoint, rather than one statement per wave. They commit or roll back with the
 * effects all the same; nothing reads a batch's audit rows before it commits.
 */
import type { TransactionSql } from '../lib/db';
import { ErrorCodes, NonRetryableError } from '../lib/errors';
import { outboxEventId } from '../outbox/event-id';
import { insertOutbox, type OutboxInsert } from '../outbox/insert-outbox';
import type { AuditEntry, AuditTrail, ConsumerDeclaration, HandlerContext } from './types';

/** Audit entries collected from several contexts, written in one call of the trail. */
export interface AuditBatch {
  add(entries: readonly AuditEntry[]): void;
  /** Write what was collected, in the order it was added, into `tx`; then start empty. */
  flush(tx: TransactionSql): Promise<void>;
}

export function auditBatch(consumer: ConsumerDeclaration): AuditBatch {
  let pending: AuditEntry[] = [];
  return {
    add(entries) {
      pending.push(...entries);
    },
    async flush(tx) {
      if (pending.length === 0) return;
      const entries = pending;
      pending = [];
      await declaredTrail(consumer)(tx, consumer.name, entries);
    },
  };
}

function declaredTrail(consumer: ConsumerDeclaration): AuditTrail {
  if (consumer.audit === undefined) {
    throw new NonRetryableError(ErrorCodes.AUDIT_NOT_DECLARED, `consumer ${consumer.name} declares no audit trail`);
  }
  return consumer.audit;
}

/** A context bound to `tx`; its audit entries go to `audits` when given, else are written at once. */
export function handlerContext(consumer: ConsumerDeclaration, tx: TransactionSql, audits?: AuditBatch): HandlerContext {
  // Per (source event, emitted type): the next ordinal.
  const ordinals = new Map<string, number>();
  return {
    async audit(entries) {
      if (entries.length === 0) return;
      const trail = declaredTrail(consumer);
      if (audits !== undefined) audits.add(entries);
      else await trail(tx, consumer.name, entries);
    },
    async emit(events) {
      const rows = events.map((e): OutboxInsert => {
        const declared = consumer.emits?.[e.eventType];
        if (declared === undefined) {
          throw new NonRetryableError(
            ErrorCodes.OUTBOX_EVENT_UNDECLARED,
            `consumer ${consumer.name} does not declare ${e.eventType} in emits`,
            { detail: { eventType: e.eventType } },
          );
        }
        const key = JSON.stringify([e.source.eventId, e.eventType]);
        const ordinal = ordinals.get(key) ?? 0;
        ordinals.set(key, ordinal + 1);
        return {
          eventId: outboxEventId(consumer.name, e.source.eventId, e.eventType, ordinal),
          consumerName: consumer.name,
          sourceEventId: e.source.eventId,
          ordinal,
          topic: declared.topic,
          eventType: e.eventType,
          eventVersion: declared.eventVersion,
          aggregateType: declared.aggregateType,
          aggregateId: e.aggregateId,
          producer: consumer.name,
          correlationId: e.source.correlationId,
          payload: e.payload,
          // The processing span's context: the relay publishes it, so a downstream consumer continues the trace.
          traceContext: e.source.traceContext ?? null,
        };
      });
      await insertOutbox(tx, rows);
    },
  };
}
