/**
 * The consumer framework's one entry point: what a team writing a consumer imports. A
 * consumer is a declaration (ConsumerDeclaration) whose handlers are built with
 * defineHandler or defineBatchHandler; the functions, the CDK app and the migration step read
 * the declarations and do the rest. The modules behind this file are the framework's own.
 */
export { defineBatchHandler, defineHandler, type BatchEventHandler } from './define';
export { DEFAULT_RETRY, backoffSeconds } from './retry';
export {
  DEFAULT_RETENTION,
  emitsEvents,
  quarantinePolicyOf,
  type AuditEntry,
  type AuditTrail,
  type ConsumerDeclaration,
  type Dialect,
  type Emission,
  type EmittedEventDeclaration,
  type EventHandler,
  type HandlerContext,
  type HandlerTable,
  type InboxEvent,
  type Mode,
  type PinnedValueSchema,
  type QuarantinePolicy,
  type RetentionPolicy,
  type RetryPolicy,
  type TablePrivileges,
} from './types';
export type { SchemaRegistryDeclaration } from './schema-registry';
export { manifestOf, type ConsumerManifest, type ConsumerManifestEntry } from './manifest';
// A payload id a handler writes into a unique key (a case id): bounded like the envelope's ids.
export { identifier, MAX_ID_BYTES } from './identifiers';
// What a handler throws to say how its event ends: quarantined at once, or retried until the
// aggregate's missing version arrives.
export { AggregateVersionGapError, NonRetryableError } from '../lib/errors';
export type { TransactionSql } from '../lib/db';
