/**
 * Small factories that put inbox and poison rows into any state, for arranging tests.
 * They write with plain SQL on purpose: a test's arrangement must not depend on the code
 * under test.
 */
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../functions/lib/db';

export type InboxStatus = 'RECEIVED' | 'PROCESSING' | 'PROCESSED' | 'RETRY_PENDING' | 'QUARANTINED' | 'IGNORED';

export interface InboxRowSpec {
  consumerName?: string;
  eventId?: string;
  eventType?: string;
  eventVersion?: number;
  aggregateType?: string;
  aggregateId?: string;
  aggregateVersion?: number | null;
  topic?: string;
  partition?: number;
  offset?: number;
  correlationId?: string | null;
  producer?: string;
  occurredAt?: Date;
  /** Seconds ago the row was received (default 0). */
  receivedSecondsAgo?: number;
  status?: InboxStatus;
  attemptCount?: number;
  /** Seconds from now the row is due (negative: overdue); null for "due now". */
  nextAttemptInSeconds?: number | null;
  lockedBy?: string | null;
  /** Seconds from now the lease expires (negative: expired). PROCESSING rows default to +300. */
  leaseExpiresInSeconds?: number;
  errorCode?: string | null;
  tenantId?: string | null;
  payload?: Record<string, unknown>;
  headers?: Record<string, string>;
}

export interface InsertedInboxRow {
  inbox_id: string;
  consumer_name: string;
  event_id: string;
  status: InboxStatus;
}

let offsetCounter = 0;

export function caseAcceptedPayload(caseId = `case_${randomUUID().slice(0, 8)}`) {
  return { caseId, acceptedAt: '2026-07-03T09:15:30Z' };
}

export async function insertInboxRow(sql: Queryable, spec: InboxRowSpec = {}): Promise<InsertedInboxRow> {
  const [row] = await insertInboxRows(sql, [spec]);
  return row!;
}

export async function insertInboxRows(sql: Queryable, specs: InboxRowSpec[]): Promise<InsertedInboxRow[]> {
  const rows = specs.map((s) => {
    const status = s.status ?? 'RECEIVED';
    const processing = status === 'PROCESSING';
    const payload = s.payload ?? caseAcceptedPayload();
    return {
      consumer_name: s.consumerName ?? 'case-projection',
      event_id: s.eventId ?? `evt_${randomUUID()}`,
      event_type: s.eventType ?? 'regulatory.case.accepted.v1',
      event_version: s.eventVersion ?? 1,
      aggregate_type: s.aggregateType ?? 'case',
      aggregate_id: s.aggregateId ?? String((payload as { caseId?: unknown }).caseId ?? `case_${randomUUID().slice(0, 8)}`),
      aggregate_version: s.aggregateVersion ?? null,
      topic_name: s.topic ?? 'regulatory.case.events.v1',
      partition_no: s.partition ?? 0,
      offset_no: s.offset ?? offsetCounter++,
      correlation_id: s.correlationId ?? null,
      producer: s.producer ?? 'case-command-service',
      occurred_at: s.occurredAt ?? new Date('2026-07-03T09:15:30Z'),
      received_seconds_ago: s.receivedSecondsAgo ?? 0,
      status,
      attempt_count: s.attemptCount ?? (processing ? 1 : 0),
      next_attempt_in_seconds: s.nextAttemptInSeconds ?? null,
      locked_by: s.lockedBy ?? (processing ? 'factory-worker' : null),
      lease_expires_in_seconds: processing ? (s.leaseExpiresInSeconds ?? 300) : null,
      error_code: s.errorCode ?? null,
      tenant_id: s.tenantId ?? null,
      payload: JSON.stringify(payload),
      headers: JSON.stringify(s.headers ?? {}),
    };
  });
  return sql<InsertedInboxRow[]>`
    insert into integration.consumer_inbox (
      consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, aggregate_version,
      topic_name, partition_no, offset_no, correlation_id, producer, occurred_at, received_at,
      status, attempt_count, next_attempt_at, locked_by, locked_at, lease_expires_at,
      processed_at, quarantined_at, error_code, tenant_id, payload, headers)
    select r.consumer_name, r.event_id, r.event_type, r.event_version, r.aggregate_type, r.aggregate_id,
           r.aggregate_version, r.topic_name, r.partition_no, r.offset_no, r.correlation_id, r.producer,
           r.occurred_at, now() - make_interval(secs => r.received_seconds_ago),
           r.status, r.attempt_count,
           case when r.next_attempt_in_seconds is null then null else now() + make_interval(secs => r.next_attempt_in_seconds) end,
           r.locked_by,
           case when r.status = 'PROCESSING' then now() end,
           case when r.lease_expires_in_seconds is null then null else now() + make_interval(secs => r.lease_expires_in_seconds) end,
           case when r.status in ('PROCESSED', 'IGNORED') then now() end,
           case when r.status = 'QUARANTINED' then now() end,
           r.error_code, r.tenant_id, r.payload::jsonb, r.headers::jsonb
    from json_to_recordset(${JSON.stringify(rows)}::text::json) as r(
      consumer_name text, event_id text, event_type text, event_version int, aggregate_type text,
      aggregate_id text, aggregate_version bigint, topic_name text, partition_no int, offset_no bigint,
      correlation_id text, producer text, occurred_at timestamptz, received_seconds_ago float8,
      status text, attempt_count int, next_attempt_in_seconds float8, locked_by text,
      lease_expires_in_seconds float8, error_code text, tenant_id text, payload text, headers text)
    returning inbox_id, consumer_name, event_id, status`;
}

export interface PoisonRowSpec {
  consumerName?: string;
  topic?: string;
  partition?: number;
  offset?: number;
  rawValue?: string | null;
  errorCode?: string;
  errorMessage?: string;
  createdSecondsAgo?: number;
}

export async function insertPoisonRow(sql: Queryable, spec: PoisonRowSpec = {}): Promise<{ poison_id: string }> {
  const [row] = await sql<{ poison_id: string }[]>`
    insert into integration.consumer_raw_poison
      (consumer_name, topic_name, partition_no, offset_no, raw_value, error_code, error_message, created_at)
    values (${spec.consumerName ?? 'case-projection'}, ${spec.topic ?? 'regulatory.case.events.v1'},
            ${spec.partition ?? 0}, ${spec.offset ?? offsetCounter++}, ${spec.rawValue ?? 'not json'},
            ${spec.errorCode ?? 'INVALID_JSON'}, ${spec.errorMessage ?? 'value is not JSON'},
            now() - make_interval(secs => ${spec.createdSecondsAgo ?? 0}))
    returning poison_id`;
  return row!;
}

/** A consumer's processing paused, as ops pause records it (with an audit row of its own). */
export async function pauseConsumer(
  sql: Queryable,
  consumerName: string,
  by = 'alice',
  target: 'worker' | 'ingest' = 'worker',
): Promise<void> {
  const [audit] = await sql<{ audit_id: string }[]>`
    insert into integration.operator_audit (action, actor, source, consumer_names, affected_count)
    values ('pause', ${by}, 'cli', array[${consumerName}]::text[], 1)
    returning audit_id`;
  await sql`
    insert into integration.consumer_pause (consumer_name, target, paused_by, reason, audit_id)
    values (${consumerName}, ${target}, ${by}, 'INC-9', ${audit!.audit_id})`;
}
