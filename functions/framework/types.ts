/**
 * The shape of a consumer declaration: the one extension point of the system. The
 * functions and the CDK app both read the declarations in ./index.ts; a team adds a
 * consumer by adding a declaration there and nothing else.
 */
import type { TraceCarrier } from '../lib/tracing';
import type { z } from 'zod';
import type { TransactionSql } from '../lib/db';
import type { TablePrivileges } from '../lib/database-roles';
import type { RetentionPolicy } from '../inbox/types';
import type { SchemaRegistryDeclaration } from './schema-registry';

export type { RetentionPolicy };

/** A consumer's own writer schema for its values (ConsumerDeclaration.valueSchema). */
export interface PinnedValueSchema {
  format: 'AVRO' | 'PROTOBUF' | 'JSON';
  /** Avro: the schema's JSON text; Protobuf: the .proto text (its first message is the value's unless an index says otherwise); JSON: the JSON Schema. */
  definition: string;
  framing?: 'confluent' | 'glue' | 'none';
}

/** How the Kafka record's JSON is shaped. canonical: the case inbox design's camelCase; snake_case: the payments inbox design's. */
export type Dialect = 'canonical' | 'snake_case';

/**
 * deferred: stored by ingest, processed by the scheduled worker. inline: processed in the
 * ingest transaction, except a row behind another of its aggregate, which goes to the worker.
 */
export type Mode = 'deferred' | 'inline';

/** What a handler receives: the inbox row's identity and its payload, parsed by the handler's schema. */
export interface InboxEvent<P = unknown> {
  inboxId: string;
  consumerName: string;
  eventId: string;
  eventType: string;
  eventVersion: number;
  aggregateType: string;
  aggregateId: string;
  /** The envelope's aggregateVersion, when it carries one. */
  aggregateVersion: number | null;
  /** A dialect's tenant field (snake_case: org_id); the handler translates it. */
  tenantId: string | null;
  producer: string;
  occurredAt: Date;
  correlationId: string | null;
  causationId: string | null;
  /** 1 for the first attempt. */
  attempt: number;
  payload: P;
  /** The record's Kafka headers, decoded (text, or `{ base64 }` for bytes that are not text). */
  headers: Readonly<Record<string, unknown>>;
  /**
   * The W3C trace context of this attempt's processing span (docs/tracing.md): a child of
   * the producer's context. Pass it on (e.g. as a `traceparent` header of a call the handler
   * makes); the events the handler emits carry it already. Null when the producer sent none
   * and tracing is off.
   */
  traceContext: TraceCarrier | null;
}

/**
 * One domain audit entry: what an effect the handler applied changed (the case inbox design's "insert
 * domain audit"). Written only for an effect that was applied: a stale duplicate, a no-op
 * or an ignored event has nothing to audit.
 */
export interface AuditEntry {
  /** The event whose processing applied the effect. */
  source: InboxEvent<unknown>;
  /** The domain object the effect changed (the case, for the case consumers). */
  subjectId: string;
  /** What changed, e.g. CASE_ACCEPTED. */
  change: string;
  /** The state before and after, where the change has one; null: nothing before. */
  before?: Record<string, unknown> | null;
  after?: Record<string, unknown> | null;
}

/** An event to publish once the processing transaction commits (the outbox). */
export interface Emission {
  /** The event whose processing emits it: its causation, correlation and derived event id. */
  source: InboxEvent<unknown>;
  /** One of the consumer declaration's `emits` types; it names the topic and version. */
  eventType: string;
  /** The emitted event's aggregate (its partition key, its publishing order). */
  aggregateId: string;
  payload: Record<string, unknown>;
}

/**
 * What a handler can do besides its own statements, in the same transaction (or savepoint)
 * as its side effects and the row's status change: all of it commits together, or rolls
 * back together with a failed attempt.
 */
export interface HandlerContext {
  /**
   * Write domain audit entries (the declaration's `audit` trail), with the handler's effects.
   * The worker's fast path collects them and writes a batch's entries in one statement after
   * its last wave, in the same savepoint; nothing reads them before the batch commits. So
   * resolving does not mean written: an entry the trail refuses fails the fast path after
   * its last wave, and the entries are written as they are then (do not change them after
   * the call).
   *
   * @example
   * await context.audit([
   *   { source: event, subjectId: event.payload.caseId, change: 'CASE_CLOSED', before: { status: 'OPEN' }, after: { status: 'CLOSED' } },
   * ]);
   */
  audit(entries: readonly AuditEntry[]): Promise<void>;
  /**
   * Emit events into integration.outbox; the relay publishes them after the commit. Each
   * event's id is derived from (consumer, source event id, type, ordinal): processing the
   * row again emits the same id, never a second, different event.
   *
   * @example
   * // `eventType` must be one of the declaration's `emits`, which names its topic and version.
   * await context.emit([
   *   { source: event, eventType: 'regulatory.case.sla-obligation-opened.v1', aggregateId: caseId, payload: { caseId, dueAt } },
   * ]);
   */
  emit(events: readonly Emission[]): Promise<void>;
}

export interface EventHandler<P = unknown> {
  /** The payload's schema for this type@version; a payload that fails it is quarantined PAYLOAD_INVALID. */
  payload: z.ZodType<P>;
  /**
   * Side effects, in the transaction that also records the row's new status. Must be
   * idempotent with respect to the domain (the inbox makes redelivery harmless, but a
   * handler should still write "insert if absent" rather than "insert").
   * Throw RetryableError / NonRetryableError (or let a database error through: it is
   * classified by SQLSTATE). `context` audits and emits in that same transaction.
   */
  handle(tx: TransactionSql, event: InboxEvent<P>, context: HandlerContext): Promise<void>;
}

/** Handlers keyed by event type, then by event version. */
export type HandlerTable = Record<string, Record<number, EventHandler<any>>>;

export interface RetryPolicy {
  /** Attempts before MAX_ATTEMPTS_EXCEEDED (10 in the case inbox design). */
  maxAttempts: number;
  /** Delay before attempt n+1 after attempt n failed, indexed by n-1; the last entry repeats. */
  backoffSeconds: number[];
  /** Random jitter added to each delay: up to min(maxJitterSeconds, delay). */
  maxJitterSeconds: number;
  /** A version gap is retried after this long… */
  versionGapRetrySeconds: number;
  /** …until the row has waited this long since it was received; then AGGREGATE_VERSION_GAP. */
  versionGapMaxWaitSeconds: number;
}

/**
 * What a QUARANTINED row means for the rows of its aggregate behind it (the case inbox design: "commit
 * Kafka offset only if policy allows quarantine progress").
 *   continue        they go on being processed (the quarantined row is skipped);
 *   hold-aggregate  they wait, unclaimed and with no attempt spent, until an operator
 *                   replays or resolves the quarantined row (deferred consumers only).
 */
export type QuarantinePolicy = 'continue' | 'hold-aggregate';

/** An event type a consumer emits: where and as what the relay publishes it. */
export interface EmittedEventDeclaration {
  topic: string;
  eventVersion: number;
  aggregateType: string;
}

/**
 * Writes a consumer's audit entries into its domain's audit table, in the handler's
 * transaction. One call may carry the entries of many handler calls: the worker's fast path
 * passes a batch's entries, of every wave, in the order they were made.
 */
export type AuditTrail = (tx: TransactionSql, consumerName: string, entries: readonly AuditEntry[]) => Promise<void>;

export type { TablePrivileges };

/**
 * One consumer: what it reads, how its events are shaped, what each event type does, and how
 * its failures and finished rows are treated. Listed in functions/consumers/index.ts, it is
 * read by the functions (ingest, worker, relay, reaper, ops), the migration step (its
 * database roles and grants) and the CDK app (its functions, mappings, schedules, alarms).
 * Stage-specific settings (batch sizes, concurrency, topics per stage) live in the stage
 * (docs/configuration.md), not here.
 *
 * @example
 * import { DEFAULT_RETENTION, DEFAULT_RETRY, type ConsumerDeclaration } from '../framework';
 *
 * export const caseSla: ConsumerDeclaration = {
 *   name: 'case-sla',
 *   topics: ['regulatory.case.events.v1'],
 *   dialect: 'canonical',
 *   mode: 'deferred',
 *   handlers: { 'regulatory.case.accepted': { 1: caseAccepted } },
 *   ignores: (eventType) => eventType.startsWith('regulatory.case.') && eventType !== 'regulatory.case.accepted',
 *   retry: DEFAULT_RETRY,
 *   retention: DEFAULT_RETENTION,
 *   quarantinePolicy: 'hold-aggregate',
 *   audit: caseAudit,
 *   emits: {
 *     'regulatory.case.sla-obligation-opened.v1': { topic: 'regulatory.case.sla-obligations.v1', eventVersion: 1, aggregateType: 'case' },
 *   },
 *   tables: {
 *     'case_core.sla_obligation': { insert: true, select: ['case_id', 'obligation_type', 'due_at', 'source_event_id'] },
 *     'case_core.case_audit': { insert: true },
 *   },
 * };
 */
export interface ConsumerDeclaration {
  /**
   * The dedupe namespace: (consumer_name, event_id) is unique. Also the Kafka consumer group
   * by default, and the suffix of its database roles (`-` as `_`): at most 57 characters.
   * @example name: 'case-projection'
   */
  name: string;
  /**
   * The Kafka topics its ingest mappings read (a stage may replace them).
   * @example topics: ['regulatory.case.events.v1']
   */
  topics: string[];
  /**
   * How the records' JSON envelope is shaped: `canonical` (camelCase) or `snake_case`.
   * @example dialect: 'canonical'
   */
  dialect: Dialect;
  /**
   * `deferred`: the worker processes the rows ingest stored. `inline`: ingest processes them in
   * its own transaction (a row behind an open one of its aggregate goes to the worker).
   * @example mode: 'deferred'
   */
  mode: Mode;
  /**
   * What the dialect lacks and the declaration supplies (snake_case has no aggregate type or producer).
   * @example envelopeDefaults: { aggregateType: 'payment', producer: 'payment-service' }
   */
  envelopeDefaults?: { aggregateType?: string; producer?: string };
  /**
   * The handler of each event type and version (defineHandler, defineBatchHandler). A type or
   * version with no handler, not ignored, is quarantined `UNKNOWN_EVENT_TYPE`.
   * @example handlers: { 'payment.completed': { 1: paymentCompleted, 2: paymentCompletedV2 } }
   */
  handlers: HandlerTable;
  /**
   * Event types that are "not this consumer's business": recorded as IGNORED, not quarantined.
   * @example ignores: (eventType) => !eventType.startsWith('regulatory.case.')
   */
  ignores?: (eventType: string) => boolean;
  /**
   * Attempts and backoff of retryable failures, and how long a version gap is waited for.
   * @example retry: { ...DEFAULT_RETRY, maxAttempts: 5 }
   */
  retry: RetryPolicy;
  /**
   * How long finished rows keep their payload, how long their dedupe key is kept (the window
   * must cover the topic's retention), and how long poison rows are kept (docs/reaper.md).
   * @example retention: { ...DEFAULT_RETENTION, payloadRetentionDays: 7 }
   */
  retention: RetentionPolicy;
  /**
   * Topics in Avro, Protobuf or JSON Schema: the mapping validates records against this
   * registry (and converts them to JSON) before the function sees them. See ./schema-registry.ts.
   * @example schemaRegistry: { type: 'glue', registryArn: 'arn:aws:glue:eu-west-1:123456789012:registry/payments' }
   */
  schemaRegistry?: SchemaRegistryDeclaration;
  /**
   * A writer schema shipped with the consumer: every value is read with it instead of asking
   * a registry (docs/ingest.md, "Binary values"). `framing` is what precedes each value's
   * body: a Confluent or Glue header (skipped, its id ignored), or nothing (default).
   * @example valueSchema: { format: 'AVRO', definition: JSON.stringify(paymentSchema), framing: 'confluent' }
   */
  valueSchema?: PinnedValueSchema;
  /**
   * Where the handlers' audit entries go (HandlerContext.audit); a consumer without one cannot audit.
   * @example audit: (tx, consumerName, entries) => writeCaseAudit(tx, consumerName, entries)
   */
  audit?: AuditTrail;
  /**
   * The event types the handlers may emit (HandlerContext.emit), keyed by type; the relay
   * publishes them, and the consumer's relay may write to those topics only.
   * @example emits: { 'payment.notified': { topic: 'payment.notifications.v1', eventVersion: 1, aggregateType: 'payment' } }
   */
  emits?: Readonly<Record<string, EmittedEventDeclaration>>;
  /**
   * What a quarantined row means for the rows of its aggregate behind it; 'continue' when omitted.
   * @example quarantinePolicy: 'hold-aggregate'
   */
  quarantinePolicy?: QuarantinePolicy;
  /**
   * The tables outside the inbox that the handlers (and the audit trail) use, schema-qualified,
   * with what they do on each. The migration step grants exactly these to the consumer's
   * worker role, and to its ingest role when the consumer is inline; no other consumer's
   * role gets them. A statement on a table not named here fails with SQLSTATE 42501.
   * @example tables: { 'billing.invoice_projection': { select: ['invoice_id'], insert: true, update: true } }
   */
  tables?: Readonly<Record<string, TablePrivileges>>;
  /**
   * The consumer stack it is deployed in (a key such as "payments"; "main" when omitted): a
   * stable choice, since moving a consumer replaces its mappings (docs/stacks.md).
   * @example stack: 'payments'
   */
  stack?: string;
}

/** Whether the declaration emits events through the outbox (an empty `emits` emits nothing). */
export function emitsEvents(consumer: Pick<ConsumerDeclaration, 'emits'>): boolean {
  return Object.keys(consumer.emits ?? {}).length > 0;
}

/** The declaration's quarantine policy, 'continue' when it names none. */
export function quarantinePolicyOf(consumer: Pick<ConsumerDeclaration, 'quarantinePolicy'>): QuarantinePolicy {
  return consumer.quarantinePolicy ?? 'continue';
}

/**
 * Retention when a declaration sets none. A finished row keeps its payload two days: enough
 * for `ops event` to show the events of yesterday's incident whole, and one consumer at 100
 * events/s keeps ~140 GB (docs/capacity.md, "Storage: the month against its log"); every
 * further day costs ~24 GB at that rate. Quarantined rows never leave, and the dedupe
 * key is kept for the whole window whatever the payload's retention. A consumer that needs
 * finished payloads longer sets `payloadRetentionDays` in its declaration.
 */
export const DEFAULT_RETENTION: RetentionPolicy = {
  payloadRetentionDays: 2,
  dedupeWindowDays: 30,
  poisonRetentionDays: 30,
  publishedOutboxDays: 7,
};
