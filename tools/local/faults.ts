/**
 * Fault injection for the local run, without touching production code: the consumer
 * declarations are wrapped, handler by handler, before the real ingest function and worker
 * receive them — the declaration is the system's extension point, so it is also the clean
 * place to inject.
 *
 * A wrapped handler runs the real handler first, then records the application in the run's
 * ledger table (local_run.applied_effect), then fails if the plan says so. Failing *after*
 * the side effects is deliberate: the effects and the ledger row must roll back with the
 * failed attempt, so the ledger counting one row per processed event proves that effects
 * and status commit together (docs/design.md §3, guarantee 2). Some failures are thrown as the error classes
 * a handler would throw; others are raised by PostgreSQL itself with a chosen SQLSTATE inside
 * the handler's transaction, so classification by SQLSTATE is exercised too.
 */
import { isBatchHandler, type BatchEventHandler } from '../../functions/framework/define';
import type { ConsumerDeclaration, EventHandler, HandlerTable, InboxEvent, RetryPolicy } from '../../functions/framework/types';
import type { Queryable, TransactionSql } from '../../functions/lib/db';
import { DatabaseRoles } from '../../functions/lib/database-roles';
import { NonRetryableError, RetryableError } from '../../functions/lib/errors';
import { INJECTED, type Fault } from './generator';

/**
 * The case inbox design's retry policy on a faster clock: the same attempt limit, delays of a fraction
 * of a second instead of seconds to half an hour, so a run shows retries, backoff and the
 * attempt limit within seconds. The version-gap wait is measured from receipt, and a run's
 * whole backlog arrives within seconds and may take tens of seconds to drain on a busy
 * machine, so it stays longer than any run: a held version waits for its predecessor.
 * (A gap retry is claimed like any attempt and counts towards maxAttempts; one second
 * between them keeps a held row well inside the limit while its predecessor comes.)
 */
export const LOCAL_RETRY: RetryPolicy = {
  maxAttempts: 10,
  backoffSeconds: [0.1, 0.2, 0.3, 0.5],
  maxJitterSeconds: 0,
  versionGapRetrySeconds: 1,
  versionGapMaxWaitSeconds: 600,
};

/**
 * The run's own scratch schema: the effects ledger and the SQLSTATE raiser. Not part of the
 * product schema; the wrapped handlers write it, so the roles that run handlers (the worker,
 * an inline consumer's ingest) get what they use, as a consumer's migration would grant it.
 */
export async function prepareLedger(sql: Queryable): Promise<void> {
  await sql`create schema if not exists local_run`;
  await sql`
    create table if not exists local_run.applied_effect (
      effect_id          bigserial primary key,
      consumer_name      text not null,
      event_id           text not null,
      aggregate_id       text not null,
      aggregate_version  bigint null,
      attempt            integer not null,
      applied_at         timestamptz not null default now()
    )`;
  await sql`
    create or replace function local_run.fail(state text) returns void
    language plpgsql as $$
    begin
      raise exception 'injected failure (SQLSTATE %)', state using errcode = state;
    end
    $$`;
  await sql`truncate local_run.applied_effect`;
  for (const role of [DatabaseRoles.worker, DatabaseRoles.ingestInline]) {
    await sql`grant usage on schema local_run to ${sql(role)}`;
    await sql`grant insert on local_run.applied_effect to ${sql(role)}`;
    await sql`grant usage on sequence local_run.applied_effect_effect_id_seq to ${sql(role)}`;
    await sql`grant execute on function local_run.fail(text) to ${sql(role)}`;
  }
}

/** Is this call (attempt) one the fault makes fail? */
export function failsOnAttempt(fault: Fault, attempt: number): boolean {
  return fault.kind !== 'transient' || attempt <= fault.failures;
}

async function inject(tx: TransactionSql, fault: Fault, event: InboxEvent): Promise<void> {
  if (!failsOnAttempt(fault, event.attempt)) return;
  if (fault.kind === 'exhaust' || (fault.kind === 'transient' && fault.via === 'retryable-error')) {
    throw new RetryableError(INJECTED.TRANSIENT, `injected transient failure (attempt ${event.attempt})`);
  }
  if (fault.kind === 'transient') {
    await tx`select local_run.fail('40001')`; // serialization_failure: retryable by SQLSTATE
    return;
  }
  if (fault.via === 'non-retryable-error') {
    throw new NonRetryableError(INJECTED.PERMANENT, 'injected permanent failure');
  }
  await tx`select local_run.fail('23514')`; // check_violation: an integrity violation, never retried
}

/** Record the applications in the run's ledger, one row per event. */
async function recordApplied(tx: TransactionSql, consumerName: string, events: readonly InboxEvent[]): Promise<void> {
  const rows = events.map((e) => ({
    event_id: e.eventId,
    aggregate_id: e.aggregateId,
    aggregate_version: e.aggregateVersion,
    attempt: e.attempt,
  }));
  await tx`
    insert into local_run.applied_effect (consumer_name, event_id, aggregate_id, aggregate_version, attempt)
    select ${consumerName}, r.event_id, r.aggregate_id, r.aggregate_version, r.attempt
    from json_to_recordset(${JSON.stringify(rows)}::text::json)
         as r(event_id text, aggregate_id text, aggregate_version bigint, attempt integer)`;
}

/**
 * A set-based handler stays set-based, as the worker runs it in production: the batch, its
 * ledger rows, then the first fault that fails on this attempt, which fails the batch; the
 * worker's slow path then runs halves of the batch until each fault is alone in its lane,
 * which runs through the wrapped handle(), where the fault lands on its own event.
 */
function wrap(handler: EventHandler, consumerName: string, faults: ReadonlyMap<string, Fault>): EventHandler {
  const handle: EventHandler['handle'] = async (tx, event, context) => {
    await handler.handle(tx, event, context);
    await recordApplied(tx, consumerName, [event]);
    const fault = faults.get(event.eventId);
    if (fault !== undefined) await inject(tx, fault, event);
  };
  if (!isBatchHandler(handler)) return { payload: handler.payload, handle };
  const batch: BatchEventHandler = {
    payload: handler.payload,
    handle,
    async handleBatch(tx, events, context) {
      await handler.handleBatch(tx, events, context);
      await recordApplied(tx, consumerName, events);
      for (const event of events) {
        const fault = faults.get(event.eventId);
        if (fault !== undefined) await inject(tx, fault, event);
      }
    },
  };
  return batch;
}

/** The declaration with every handler wrapped by the fault plan, and the accelerated retry policy. */
export function withFaults(consumer: ConsumerDeclaration, faults: ReadonlyMap<string, Fault>): ConsumerDeclaration {
  const handlers: HandlerTable = {};
  for (const [eventType, versions] of Object.entries(consumer.handlers)) {
    handlers[eventType] = Object.fromEntries(
      Object.entries(versions).map(([version, handler]) => [version, wrap(handler, consumer.name, faults)]),
    );
  }
  return { ...consumer, handlers, retry: LOCAL_RETRY };
}
