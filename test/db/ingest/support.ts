/** Shared arrangement for the ingest tests: envelopes, an ingest over a test database, row readers. */
import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { getConsumer } from '../../../functions/consumers';
import type { ConsumerDeclaration } from '../../../functions/framework/types';
import type { IngestReport } from '../../../functions/ingest/batch-report';
import { binaryValues } from '../../../functions/wings/decoding/binary-values';
import { createIngest } from '../../../functions/ingest/ingest';
import type { KafkaEvent } from '../../../functions/ingest/types';
import type { Queryable, Sql } from '../../../functions/lib/db';
import { ingestRoleOf, type DatabaseRole } from '../../../functions/lib/database-roles';
import { caseAccepted as acceptedEnvelope } from '../../../tools/case-events';
import type { TestDatabase } from '../../helpers/db';

export const CASE_TOPIC = 'regulatory.case.events.v1';
export const PAYMENT_TOPIC = 'payment.completed';

export function caseAccepted(eventId = `evt_${randomUUID()}`, overrides: Record<string, unknown> = {}) {
  const caseId = `case_${randomUUID().slice(0, 8)}`;
  return { ...acceptedEnvelope(caseId, eventId), correlationId: `corr_${eventId}`, partitionKey: caseId, ...overrides };
}

export function paymentCompleted(eventId: string = randomUUID(), overrides: Record<string, unknown> = {}) {
  return {
    event_id: eventId,
    event_type: 'payment.completed',
    event_version: 1,
    org_id: '7d1f2c4e-8a9b-4c3d-9e8f-1a2b3c4d5e6f',
    aggregate_id: randomUUID(),
    occurred_at: '2026-07-03T09:15:30Z',
    payload: { amount: 1250, currency: 'EUR' },
    ...overrides,
  };
}

export function quiet(): { logger: Logger; metrics: Metrics } {
  return {
    logger: new Logger({ serviceName: 'ingest-test', logLevel: 'SILENT' }),
    metrics: new Metrics({ namespace: 'IngestTest', serviceName: 'ingest-test' }),
  };
}

let requests = 0;

const declaration = (consumer: string | ConsumerDeclaration) => (typeof consumer === 'string' ? getConsumer(consumer) : consumer);

/** The database role the consumer's ingest function connects as. */
export function ingestRole(consumer: string | ConsumerDeclaration): DatabaseRole {
  return ingestRoleOf(declaration(consumer));
}

/**
 * An ingest for `consumer`; call it like the Lambda runtime would. Given the test database,
 * it connects as the consumer's ingest role, as the function does; given a client, on that
 * client (make it with `db.client({ role: ingestRole(consumer), … })`).
 */
export function ingestFor(
  target: Sql | TestDatabase,
  consumer: string | ConsumerDeclaration,
  maxPayloadBytes = 256 * 1024,
): (event: KafkaEvent) => Promise<IngestReport> {
  const ingest = createIngest({
    sql: 'as' in target ? target.as(ingestRole(consumer)) : target,
    consumer: declaration(consumer),
    config: { maxPayloadBytes },
    // As the handler plugs it in for every consumer.
    valueDecoder: binaryValues(declaration(consumer)),
    ...quiet(),
  });
  return (event) => ingest(event, { awsRequestId: `req-${++requests}` });
}

export interface StoredRow {
  consumer_name: string;
  event_id: string;
  partition_no: number;
  offset_no: number;
  status: string;
}

export async function inboxRows(q: Queryable, consumer?: string): Promise<StoredRow[]> {
  return q<StoredRow[]>`
    select consumer_name, event_id, partition_no, offset_no, status from integration.consumer_inbox
    where ${consumer === undefined ? q`true` : q`consumer_name = ${consumer}`}
    order by consumer_name, partition_no, offset_no`;
}

export interface PoisonRow {
  consumer_name: string;
  partition_no: number;
  offset_no: number;
  error_code: string;
  error_message: string;
  raw_value: string | null;
  raw_encoding: string;
  record_key: string | null;
  record_key_encoding: string;
  headers: Record<string, unknown>;
  record_timestamp: Date | null;
}

export async function poisonRows(q: Queryable): Promise<PoisonRow[]> {
  return q<PoisonRow[]>`
    select consumer_name, partition_no, offset_no, error_code, error_message, raw_value, raw_encoding,
           record_key, record_key_encoding, headers, record_timestamp
    from integration.consumer_raw_poison order by consumer_name, partition_no, offset_no`;
}

export async function truncateAll(q: Queryable): Promise<void> {
  await q`truncate integration.consumer_inbox, integration.consumer_raw_poison, public.notification_jobs`;
}
