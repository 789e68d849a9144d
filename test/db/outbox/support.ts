/** Shared arrangement for the outbox relay's tests: outbox rows in any state, a counting producer, the relay's dependencies. */
import { randomUUID } from 'node:crypto';
import { caseSla } from '../../../functions/consumers/case-sla';
import { DEFAULTS } from '../../../functions/lib/config';
import type { Queryable, Sql } from '../../../functions/lib/db';
import type { OutboxMessage, OutboxProducer } from '../../../functions/relay/producer';
import { newRelayOwnerId, runRelay, type RelayDependencies, type RelayResult } from '../../../functions/relay/run-relay';
import { MetricsRecorder, quietLogger } from '../reaper/support';

export interface OutboxRowSpec {
  consumerName?: string;
  sourceEventId?: string;
  topic?: string;
  eventType?: string;
  aggregateId: string;
  payload?: Record<string, unknown>;
  correlationId?: string | null;
}

/**
 * Outbox rows in the given order (their outbox_seq order), with plain SQL: a test's
 * arrangement must not depend on the code under test. The lane trigger marks their lanes.
 */
export async function insertOutboxRows(
  sql: Queryable,
  specs: readonly OutboxRowSpec[],
): Promise<{ outbox_seq: number; event_id: string; aggregate_id: string }[]> {
  const rows = specs.map((s, n) => ({
    n,
    event_id: randomUUID(),
    consumer_name: s.consumerName ?? 'case-sla',
    source_event_id: s.sourceEventId ?? `evt_${randomUUID()}`,
    topic_name: s.topic ?? 'regulatory.case.sla-obligations.v1',
    event_type: s.eventType ?? 'regulatory.case.sla-obligation-opened.v1',
    aggregate_id: s.aggregateId,
    correlation_id: s.correlationId ?? null,
    payload: s.payload ?? { caseId: s.aggregateId, n },
  }));
  return sql<{ outbox_seq: number; event_id: string; aggregate_id: string }[]>`
    insert into integration.outbox (event_id, consumer_name, source_event_id, ordinal, topic_name, event_type, event_version,
                                    aggregate_type, aggregate_id, producer, correlation_id, payload)
    select r.event_id, r.consumer_name, r.source_event_id, 0, r.topic_name, r.event_type, 1,
           'case', r.aggregate_id, r.consumer_name, r.correlation_id, r.payload
    from json_to_recordset(${JSON.stringify(rows)}::text::json) as r(
      n int, event_id uuid, consumer_name text, source_event_id text, topic_name text, event_type text,
      aggregate_id text, correlation_id text, payload jsonb)
    order by r.n
    returning outbox_seq, event_id::text, aggregate_id`;
}

export interface PublishCall {
  topic: string;
  messages: readonly OutboxMessage[];
}

/**
 * A producer that records every call and every message it accepted, in order; `refuse`
 * decides per call whether the broker refuses it (nothing is written then), `delayMs`
 * holds each call (to make relays overlap).
 */
export class CountingProducer implements OutboxProducer {
  readonly calls: PublishCall[] = [];
  readonly accepted: (OutboxMessage & { topic: string; eventId: string })[] = [];

  constructor(private readonly options: { refuse?: (call: PublishCall) => boolean; delayMs?: number } = {}) {}

  async publish(topic: string, messages: readonly OutboxMessage[]): Promise<void> {
    const call = { topic, messages };
    this.calls.push(call);
    if (this.options.delayMs) await new Promise((r) => setTimeout(r, this.options.delayMs));
    if (this.options.refuse?.(call)) throw new BrokerRefused('NOT_LEADER_FOR_PARTITION');
    for (const m of messages) this.accepted.push({ ...m, topic, eventId: m.headers.eventId! });
  }

  /** The event ids accepted for one key, in order. */
  eventIdsOf(key: string): string[] {
    return this.accepted.filter((m) => m.key === key).map((m) => m.eventId);
  }
}

export class BrokerRefused extends Error {
  constructor(code: string) {
    super(`broker refused the produce request: ${code}`);
    this.name = 'BrokerRefused';
  }
}

export const relayConfig = (overrides: Partial<RelayDependencies['config']['relay']> = {}): RelayDependencies['config'] => ({
  relay: {
    batchSize: 100,
    runLength: 50,
    safetyMarginMs: 1_000,
    leaseSeconds: 60,
    purgeBatchSize: 1_000,
    backoffSeconds: DEFAULTS.relayBackoffSeconds,
    ...overrides,
  },
});

export function relay(
  sql: Sql,
  producer: OutboxProducer,
  extra: Partial<Omit<RelayDependencies, 'sql' | 'producer'>> = {},
): Promise<RelayResult> {
  return runRelay({
    sql,
    producer,
    // The reference consumer that emits; the rows insertOutboxRows writes are its own by default.
    consumer: caseSla,
    config: relayConfig(),
    logger: quietLogger,
    metrics: new MetricsRecorder(),
    owner: newRelayOwnerId('test'),
    remainingMs: () => 600_000,
    random: () => 0,
    ...extra,
  });
}

export interface OutboxState {
  outbox_seq: number;
  event_id: string;
  aggregate_id: string;
  published: boolean;
  claimed_by: string | null;
  attempt_count: number;
  last_error_code: string | null;
  due_in_seconds: number | null;
}

export async function outboxStates(sql: Queryable): Promise<OutboxState[]> {
  return sql<OutboxState[]>`
    select outbox_seq, event_id::text, aggregate_id, published_at is not null as published, claimed_by, attempt_count, last_error_code,
           extract(epoch from next_attempt_at - now())::float8 as due_in_seconds
    from integration.outbox order by outbox_seq`;
}
