/**
 * The envelope dialects (docs/design.md §10) and the one normalized shape they become.
 *
 * canonical (the case inbox design) is camelCase; snake_case (the payments inbox design) names fields its own way and
 * lacks what the consumer declaration's `envelopeDefaults` supply (aggregate type,
 * producer). Its `org_id` is kept as the row's tenant; the consumer's handler is the one
 * place that translates it. Unknown extra fields are allowed in both dialects: producers
 * add fields before consumers know them.
 *
 * Validation stops at the envelope. The payload is only required to be a JSON object here;
 * its schema per type@version belongs to the handler (a mismatch is quarantined
 * PAYLOAD_INVALID by dispatch), because a payload the handler cannot read is still an
 * event the inbox must remember.
 */
import { z } from 'zod';
import type { NormalizedEnvelope } from '../inbox/types';
import { idBytesOver, MAX_ID_BYTES } from './identifiers';
import type { ConsumerDeclaration, Dialect } from './types';

export type { NormalizedEnvelope };

export type EnvelopeResult =
  | { ok: true; envelope: NormalizedEnvelope }
  /**
   * `message` names field paths and rules only, never a value of the record; `idTooLong`
   * when the envelope is valid but an id is longer than MAX_ID_BYTES (./identifiers.ts).
   */
  | { ok: false; message: string; idTooLong?: true };

/** The integer column bounds: a value outside them would fail in PostgreSQL instead of here. */
const INT4_MAX = 2_147_483_647;

const text = z.string().min(1);
const optionalText = z.string().min(1).nullish();
const eventVersion = z.number().int().gt(0).max(INT4_MAX);
const aggregateVersion = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).nullish();
const occurredAt = z.iso.datetime({ offset: true });
/** Cheaper than z.record(): the payload's members are the handler's business. */
const payloadObject = z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), {
  message: 'expected a JSON object',
});

const canonical = z.object({
  eventId: text,
  eventType: text,
  eventVersion,
  occurredAt,
  producer: optionalText,
  correlationId: optionalText,
  causationId: optionalText,
  aggregateType: optionalText,
  aggregateId: text,
  partitionKey: optionalText,
  aggregateVersion,
  payload: payloadObject,
});

const snakeCase = z.object({
  // z.guid(): any 8-4-4-4-12 hex, as PostgreSQL's uuid type accepts, whatever the version bits.
  event_id: z.guid(),
  event_type: text,
  event_version: eventVersion,
  org_id: z.guid().nullish(),
  aggregate_id: text,
  occurred_at: occurredAt,
  // Not in the payments inbox design, accepted when a producer sends them.
  aggregate_type: optionalText,
  aggregate_version: aggregateVersion,
  producer: optionalText,
  correlation_id: optionalText,
  causation_id: optionalText,
  partition_key: optionalText,
  payload: payloadObject,
});

type Defaults = NonNullable<ConsumerDeclaration['envelopeDefaults']>;

function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .slice(0, 10)
    .map((i) => `${i.path.length > 0 ? i.path.join('.') : '(envelope)'}: ${i.message}`)
    .join('; ');
}

/** A dialect's reading of the envelope; producer and aggregate type may still be missing. */
type Read = Omit<NormalizedEnvelope, 'producer' | 'aggregateType'> & {
  producer: string | null | undefined;
  aggregateType: string | null | undefined;
};

function readCanonical(value: unknown): Read | string {
  const parsed = canonical.safeParse(value);
  if (!parsed.success) return describeIssues(parsed.error.issues);
  const e = parsed.data;
  return {
    eventId: e.eventId,
    eventType: e.eventType,
    eventVersion: e.eventVersion,
    occurredAt: e.occurredAt,
    producer: e.producer,
    correlationId: e.correlationId ?? null,
    causationId: e.causationId ?? null,
    aggregateType: e.aggregateType,
    aggregateId: e.aggregateId,
    aggregateVersion: e.aggregateVersion ?? null,
    partitionKey: e.partitionKey ?? null,
    tenantId: null,
  };
}

function readSnakeCase(value: unknown): Read | string {
  const parsed = snakeCase.safeParse(value);
  if (!parsed.success) return describeIssues(parsed.error.issues);
  const e = parsed.data;
  return {
    // A uuid is one event whatever its letter case; the dedupe key must agree.
    eventId: e.event_id.toLowerCase(),
    eventType: e.event_type,
    eventVersion: e.event_version,
    occurredAt: e.occurred_at,
    producer: e.producer,
    correlationId: e.correlation_id ?? null,
    causationId: e.causation_id ?? null,
    aggregateType: e.aggregate_type,
    aggregateId: e.aggregate_id,
    aggregateVersion: e.aggregate_version ?? null,
    partitionKey: e.partition_key ?? null,
    tenantId: e.org_id?.toLowerCase() ?? null,
  };
}

const READERS: Record<Dialect, { read: (value: unknown) => Read | string; producer: string; aggregateType: string }> = {
  canonical: { read: readCanonical, producer: 'producer', aggregateType: 'aggregateType' },
  snake_case: { read: readSnakeCase, producer: 'producer', aggregateType: 'aggregate_type' },
};

const missing = (field: string): EnvelopeResult => ({
  ok: false,
  message: `${field}: required (the envelope lacks it and the consumer declares no default)`,
});

/** Validate a parsed JSON object against the consumer's dialect and normalize it. */
export function normalizeEnvelope(consumer: Pick<ConsumerDeclaration, 'dialect' | 'envelopeDefaults'>, value: unknown): EnvelopeResult {
  const dialect = READERS[consumer.dialect];
  const read = dialect.read(value);
  if (typeof read === 'string') return { ok: false, message: read };
  const defaults: Defaults = consumer.envelopeDefaults ?? {};
  const producer = read.producer ?? defaults.producer;
  if (producer === undefined) return missing(dialect.producer);
  const aggregateType = read.aggregateType ?? defaults.aggregateType;
  if (aggregateType === undefined) return missing(dialect.aggregateType);
  const tooLong = idsTooLong({ eventId: read.eventId, aggregateType, aggregateId: read.aggregateId });
  if (tooLong !== null) return { ok: false, message: tooLong, idTooLong: true };
  return { ok: true, envelope: { ...read, producer, aggregateType } };
}

/** The ids that end up in unique keys, over MAX_ID_BYTES: which and how long (never their values). */
function idsTooLong(ids: Record<'eventId' | 'aggregateType' | 'aggregateId', string>): string | null {
  const over = Object.entries(ids).flatMap(([field, value]) => {
    const bytes = idBytesOver(value);
    return bytes === null ? [] : [`${field}: ${bytes} bytes, at most ${MAX_ID_BYTES}`];
  });
  return over.length === 0 ? null : over.join('; ');
}
