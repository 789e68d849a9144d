/**
 * The generated stream of the local run, and what must become of every record in it.
 *
 * From one seed it produces, per topic and partition, the records a producer would have
 * written — regulatory case events (accepted v1, then status changes v2..k per case, keyed
 * by case id) and payment.completed events (keyed by payment) — mixed with the troubles a
 * consumer meets in production:
 *
 * - duplicates: an event produced again at a later offset (a producer retry), same event id;
 * - poison: records no consumer can read (bad base64, not UTF-8, not JSON, an envelope that
 *   fails validation, a tombstone, a NUL that PostgreSQL refuses to store);
 * - contract violations: readable events the consumer must quarantine (payload invalid,
 *   unknown version, unknown type) or ignore (a case event that is not case-sla's business);
 * - out-of-order versions: Kafka keeps per-key order within a partition, so a status change
 *   arrives before its predecessor only when the producer sends them out of order or sends
 *   one with another partitioner; both are generated on purpose;
 * - a fault plan: per (consumer, event id), the handler fails transiently (then succeeds)
 *   or for good, as tools/local/faults.ts injects it.
 *
 * Alongside the records it writes the ledger: for every consumer and event id the final
 * status (and quarantine code) the system must reach, the poison offsets each consumer must
 * capture, and the domain rows that must exist at the end. The invariant checks compare the
 * database against this ledger.
 */
import { CASE_ACCEPTED, CASE_EVENTS_TOPIC, CASE_STATUS_CHANGED } from '../../functions/consumers/case-projection';
import { PAYMENT_COMPLETED } from '../../functions/consumers/notification-service';
import { ErrorCodes } from '../../functions/lib/errors';
import type { LocalOptions } from './options';
import type { OwnEvents } from './own-events';
import { createRandom, hash32, type Random } from './random';

export const CASE_PROJECTION = 'case-projection';
export const CASE_SLA = 'case-sla';
export const NOTIFICATION_SERVICE = 'notification-service';
export const CASE_WITHDRAWN = 'regulatory.case.withdrawn.v1';

/** The consumer groups of each topic: one topic read by two consumers feeds both. */
export const TOPIC_CONSUMERS: Readonly<Record<string, readonly string[]>> = {
  [CASE_EVENTS_TOPIC]: [CASE_PROJECTION, CASE_SLA],
  [PAYMENT_COMPLETED]: [NOTIFICATION_SERVICE],
};

/** Codes of the injected failures, as the consumers' rows must end up recording them. */
export const INJECTED = {
  TRANSIENT: 'INJECTED_TRANSIENT',
  PERMANENT: 'INJECTED_PERMANENT',
} as const;

export type PoisonKind = 'bad-base64' | 'not-utf8' | 'not-json' | 'envelope-invalid' | 'tombstone' | 'nul-in-json';
export const POISON_KINDS: readonly PoisonKind[] = ['bad-base64', 'not-utf8', 'not-json', 'envelope-invalid', 'tombstone', 'nul-in-json'];

/**
 * An injected handler failure.
 * - transient: the first `failures` calls fail (a RetryableError, or SQLSTATE 40001 raised by
 *   PostgreSQL inside the handler's transaction), then the handler succeeds;
 * - permanent: every call fails (a NonRetryableError, or SQLSTATE 23514 raised by PostgreSQL);
 * - exhaust: every call fails retryably, until the attempts run out.
 */
export type Fault =
  | { kind: 'transient'; via: 'retryable-error' | 'serialization-failure'; failures: number }
  | { kind: 'permanent'; via: 'non-retryable-error' | 'check-violation' }
  | { kind: 'exhaust' };

export interface Expectation {
  status: 'PROCESSED' | 'IGNORED' | 'QUARANTINED';
  /** The quarantine code the row must carry. */
  errorCode?: string;
}

export interface ProducedRecord {
  key: string | null;
  /** The value's bytes; null for a tombstone. */
  value: Buffer | null;
  /** Set for bad-base64 poison: the value as the mapping must put it in the event, verbatim. */
  rawValueBase64?: string;
  headers: Record<string, string>;
  timestamp: number;
  /** What this record is, for the ledger and the progress display. */
  label: { kind: 'event' | 'duplicate'; eventId: string } | { kind: 'poison'; poison: PoisonKind };
}

export interface PoisonExpectation {
  topic: string;
  partition: number;
  offset: number;
  kind: PoisonKind;
}

export interface CaseExpectation {
  caseId: string;
  /** The projection's final state; null when no case_summary row may exist. */
  projection: { status: string; version: number } | null;
  /** Whether case-sla must have opened the initial-assessment obligation. */
  slaObligation: boolean;
}

export interface GeneratedStream {
  seed: number;
  /** topic → partitions → records in offset order (the index is the offset). */
  topics: Map<string, ProducedRecord[][]>;
  /** consumer → event id → the final state its inbox row must reach. */
  expected: Map<string, Map<string, Expectation>>;
  /** consumer → poison records it must capture, once each. */
  poison: Map<string, PoisonExpectation[]>;
  /** consumer → event id → the fault its handler must suffer. */
  faults: Map<string, Map<string, Fault>>;
  cases: CaseExpectation[];
  /** payment event id → org_id, for each payment that must yield exactly one notification job. */
  notifications: Map<string, string>;
  /**
   * The production clock: record timestamps start at `startsAt` (epoch ms) and the events
   * spread evenly over `spanMs` from there (a case's later versions and a producer's
   * retries land a little after it). A steady-load run replays this clock at its rate.
   */
  clock: { startsAt: number; spanMs: number };
  counts: {
    events: number;
    caseEvents: number;
    payments: number;
    duplicates: number;
    poison: number;
    invalid: number;
    outOfOrderCases: number;
    faults: number;
  };
  /** A run on a file of one consumer's own events (own-events.ts): what is unknown here is checked generically. */
  own?: OwnEvents;
}

/** Statuses a case moves through after acceptance (version 2 onwards). */
const LIFECYCLE = ['UNDER_ASSESSMENT', 'INFORMATION_REQUESTED', 'UNDER_ASSESSMENT', 'DECISION_ISSUED', 'CLOSED'] as const;
const MAX_CHAIN = LIFECYCLE.length + 1;
const PAYMENT_SHARE = 0.25;
const ORGS = 5;
const EPOCH = Date.parse('2026-07-03T09:00:00Z');

/** Which status version v of a chain sets. */
export function statusOfVersion(version: number): string {
  return version === 1 ? 'ACCEPTED' : LIFECYCLE[(version - 2) % LIFECYCLE.length]!;
}

/** Kafka's default partitioner hashes the key (murmur2); any stable hash shows the same behaviour. */
export function partitionOf(key: string, partitions: number): number {
  return hash32(key) % partitions;
}

interface Planned {
  /** Production order. */
  time: number;
  topic: string;
  partition: number;
  record: Omit<ProducedRecord, 'timestamp'>;
}

interface Builder {
  rng: Random;
  options: LocalOptions;
  planned: Planned[];
  expected: Map<string, Map<string, Expectation>>;
  faults: Map<string, Map<string, Fault>>;
  seq: number;
}

function expect(b: Builder, consumer: string, eventId: string, expectation: Expectation): void {
  b.expected.get(consumer)!.set(eventId, expectation);
}

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}

function isoAt(time: number): string {
  return new Date(EPOCH + Math.round(time * 1000)).toISOString();
}

function caseEnvelope(b: Builder, caseId: string, version: number, time: number, eventId: string) {
  const accepted = version === 1;
  return {
    eventId,
    eventType: accepted ? CASE_ACCEPTED : CASE_STATUS_CHANGED,
    eventVersion: 1,
    occurredAt: isoAt(time),
    producer: 'case-command-service',
    correlationId: `corr_${caseId}`,
    causationId: `cmd_${b.rng.uuid().slice(0, 8)}`,
    aggregateType: 'case',
    aggregateId: caseId,
    partitionKey: caseId,
    aggregateVersion: version,
    payload: accepted ? { caseId, acceptedAt: isoAt(time) } : { caseId, newStatus: statusOfVersion(version) },
  };
}

function paymentEnvelope(b: Builder, eventId: string, orgId: string | null, time: number) {
  const paymentId = b.rng.uuid();
  return {
    event_id: eventId,
    event_type: PAYMENT_COMPLETED,
    event_version: 1,
    ...(orgId !== null ? { org_id: orgId } : {}),
    aggregate_id: paymentId,
    occurred_at: isoAt(time),
    payload: {
      payment_id: paymentId,
      amount_cents: b.rng.int(100, 500_000),
      currency: b.rng.pick(['EUR', 'GBP', 'USD']),
      customer_email_ref: `cust_${b.rng.int(1, 9999)}`,
    },
  };
}

function eventRecord(key: string, eventId: string, envelope: unknown, producer: string): Omit<ProducedRecord, 'timestamp'> {
  return { key, value: json(envelope), headers: { 'content-type': 'application/json', producer }, label: { kind: 'event', eventId } };
}

/** A fault for one (consumer, event), or none, drawn at the configured rates. */
function drawFault(b: Builder, allowPermanent: boolean): Fault | undefined {
  const { transientRate, permanentRate } = b.options;
  const draw = b.rng.next();
  if (draw < transientRate) {
    return { kind: 'transient', via: b.rng.chance(0.5) ? 'retryable-error' : 'serialization-failure', failures: b.rng.int(1, 2) };
  }
  if (allowPermanent && draw < transientRate + permanentRate) {
    const pick = b.rng.int(0, 2);
    if (pick === 0) return { kind: 'exhaust' };
    return { kind: 'permanent', via: pick === 1 ? 'non-retryable-error' : 'check-violation' };
  }
  return undefined;
}

/** The final state a handled event reaches under a fault (or none). */
export function expectationUnder(fault: Fault | undefined): Expectation {
  if (fault === undefined || fault.kind === 'transient') return { status: 'PROCESSED' };
  if (fault.kind === 'exhaust') return { status: 'QUARANTINED', errorCode: ErrorCodes.MAX_ATTEMPTS_EXCEEDED };
  return {
    status: 'QUARANTINED',
    errorCode: fault.via === 'non-retryable-error' ? INJECTED.PERMANENT : ErrorCodes.DB_INTEGRITY_VIOLATION,
  };
}

function planFault(b: Builder, consumer: string, eventId: string, allowPermanent: boolean): Expectation {
  const fault = drawFault(b, allowPermanent);
  if (fault !== undefined) b.faults.get(consumer)!.set(eventId, fault);
  return expectationUnder(fault);
}

/**
 * One case: accepted (v1) and status changes v2..k, produced in order on the case's
 * partition — or, for an out-of-order case, with one pair of consecutive versions swapped
 * and possibly one version sent to another partition.
 */
function addCase(b: Builder, k: number, start: number, outOfOrder: boolean): CaseExpectation {
  const { rng, options } = b;
  const caseId = `case_${String(++b.seq).padStart(6, '0')}`;
  const home = partitionOf(caseId, options.partitions);
  const times: number[] = [];
  let t = start;
  for (let v = 1; v <= k; v++) {
    times.push(t);
    t += rng.int(1, 40);
  }
  const partitions = times.map(() => home);
  if (outOfOrder) {
    const i = rng.int(0, k - 2); // swap versions i+1 and i+2
    [times[i], times[i + 1]] = [times[i + 1]!, times[i]!];
    if (options.partitions > 1 && rng.chance(0.5)) partitions[i + 1] = (home + 1) % options.partitions;
  }

  // Injected faults stay out of out-of-order chains, and at most one per consumer and chain:
  // a row held back by a version gap burns attempts while it waits, and a fault on top of that
  // could reach the attempt limit for a reason the plan did not choose. Permanent faults of
  // case-projection only hit a chain's last version, since every later version would then
  // wait for a predecessor that never comes (and end AGGREGATE_VERSION_GAP, by design).
  // case-sla's only hit a chain of one: both case consumers hold an aggregate behind its
  // quarantined row (quarantine policy hold-aggregate), so the status changes after a
  // quarantined acceptance would wait for an operator and the run would never settle.
  const faultFree = outOfOrder;
  let projectionFaulted = faultFree;
  let projection: CaseExpectation['projection'] = null;
  let slaObligation = false;
  for (let v = 1; v <= k; v++) {
    const eventId = `evt_${rng.uuid()}`;
    const envelope = caseEnvelope(b, caseId, v, times[v - 1]!, eventId);
    b.planned.push({
      time: times[v - 1]!,
      topic: CASE_EVENTS_TOPIC,
      partition: partitions[v - 1]!,
      record: eventRecord(caseId, eventId, envelope, 'case-command-service'),
    });

    const p = projectionFaulted ? { status: 'PROCESSED' as const } : planFault(b, CASE_PROJECTION, eventId, v === k);
    projectionFaulted ||= b.faults.get(CASE_PROJECTION)!.has(eventId);
    expect(b, CASE_PROJECTION, eventId, p);
    if (p.status === 'PROCESSED') projection = { status: statusOfVersion(v), version: v };

    if (v === 1) {
      const s = faultFree ? { status: 'PROCESSED' as const } : planFault(b, CASE_SLA, eventId, k === 1);
      expect(b, CASE_SLA, eventId, s);
      slaObligation = s.status === 'PROCESSED';
    } else {
      expect(b, CASE_SLA, eventId, { status: 'IGNORED' });
    }
  }
  return { caseId, projection, slaObligation };
}

function addPayment(b: Builder, time: number, notifications: Map<string, string>): void {
  const eventId = b.rng.uuid();
  const orgId = `00000000-0000-4000-8000-${String(b.rng.int(1, ORGS)).padStart(12, '0')}`;
  const envelope = paymentEnvelope(b, eventId, orgId, time);
  b.planned.push({
    time,
    topic: PAYMENT_COMPLETED,
    partition: partitionOf(envelope.aggregate_id, b.options.partitions),
    record: eventRecord(envelope.aggregate_id, eventId, envelope, 'payment-service'),
  });
  const e = planFault(b, NOTIFICATION_SERVICE, eventId, true);
  expect(b, NOTIFICATION_SERVICE, eventId, e);
  if (e.status === 'PROCESSED') notifications.set(eventId, orgId);
}

type InvalidKind = 'payload-invalid' | 'unknown-version' | 'unknown-type' | 'payment-unknown-version' | 'payment-no-org';
const INVALID_KINDS: readonly InvalidKind[] = [
  'payload-invalid',
  'unknown-version',
  'unknown-type',
  'payment-unknown-version',
  'payment-no-org',
];

/** A readable event that breaks its consumer's contract: quarantined (or ignored) by the worker, not poison. */
function addInvalid(b: Builder, kind: InvalidKind, time: number): void {
  if (kind === 'payment-unknown-version' || kind === 'payment-no-org') {
    const eventId = b.rng.uuid();
    const envelope = paymentEnvelope(b, eventId, kind === 'payment-no-org' ? null : '00000000-0000-4000-8000-000000000001', time);
    if (kind === 'payment-unknown-version') envelope.event_version = 2;
    b.planned.push({
      time,
      topic: PAYMENT_COMPLETED,
      partition: partitionOf(envelope.aggregate_id, b.options.partitions),
      record: eventRecord(envelope.aggregate_id, eventId, envelope, 'payment-service'),
    });
    expect(b, NOTIFICATION_SERVICE, eventId, {
      status: 'QUARANTINED',
      errorCode: kind === 'payment-no-org' ? 'TENANT_MISSING' : ErrorCodes.UNSUPPORTED_EVENT_VERSION,
    });
    return;
  }
  const caseId = `case_invalid_${String(++b.seq).padStart(6, '0')}`;
  const eventId = `evt_${b.rng.uuid()}`;
  const envelope: Record<string, unknown> = caseEnvelope(b, caseId, 1, time, eventId);
  if (kind === 'payload-invalid') envelope.payload = { caseId }; // acceptedAt missing
  if (kind === 'unknown-version') envelope.eventVersion = 2;
  if (kind === 'unknown-type') envelope.eventType = CASE_WITHDRAWN;
  b.planned.push({
    time,
    topic: CASE_EVENTS_TOPIC,
    partition: partitionOf(caseId, b.options.partitions),
    record: eventRecord(caseId, eventId, envelope, 'case-command-service'),
  });
  const code =
    kind === 'payload-invalid'
      ? ErrorCodes.PAYLOAD_INVALID
      : kind === 'unknown-version'
        ? ErrorCodes.UNSUPPORTED_EVENT_VERSION
        : ErrorCodes.UNSUPPORTED_EVENT_TYPE;
  expect(b, CASE_PROJECTION, eventId, { status: 'QUARANTINED', errorCode: code });
  // A withdrawn case is a regulatory.case.* event that case-sla declares not its business.
  expect(b, CASE_SLA, eventId, kind === 'unknown-type' ? { status: 'IGNORED' } : { status: 'QUARANTINED', errorCode: code });
}

/** The bytes (or verbatim base64) of one poison record of a kind, for a topic's dialect. */
function poisonRecord(b: Builder, kind: PoisonKind, topic: string, time: number): Omit<ProducedRecord, 'timestamp'> {
  const label = { kind: 'poison' as const, poison: kind };
  const key = `poison_${String(++b.seq).padStart(6, '0')}`;
  const headers = { 'content-type': 'application/json', 'x-poison-kind': kind };
  const canonical = topic === CASE_EVENTS_TOPIC;
  switch (kind) {
    case 'bad-base64':
      // Node's decoder would skip the invalid characters and decode the rest: the ingest
      // function must notice on its own.
      return { key, value: null, rawValueBase64: 'eyJldmVudElkIjoi*not base64*', headers, label };
    case 'not-utf8':
      return { key, value: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d]), headers, label };
    case 'not-json':
      return { key, value: Buffer.from('{"eventId": "evt_truncated", "eventType": "regulatory.ca', 'utf8'), headers, label };
    case 'envelope-invalid': {
      const envelope: Record<string, unknown> = canonical
        ? caseEnvelope(b, key, 1, time, `evt_${b.rng.uuid()}`)
        : paymentEnvelope(b, b.rng.uuid(), '00000000-0000-4000-8000-000000000001', time);
      if (canonical) delete envelope.eventType;
      else envelope.event_id = 'not-a-uuid';
      return { key, value: json(envelope), headers, label };
    }
    case 'tombstone':
      return { key, value: null, headers: {}, label };
    case 'nul-in-json': {
      const envelope: Record<string, unknown> = canonical
        ? caseEnvelope(b, key, 1, time, `evt_${b.rng.uuid()}`)
        : paymentEnvelope(b, b.rng.uuid(), '00000000-0000-4000-8000-000000000001', time);
      // JSON.stringify writes the NUL as the escape \u0000, which jsonb refuses (22P05).
      envelope.payload = { ...(envelope.payload as object), note: 'before\u0000after' };
      return { key, value: json(envelope), headers, label };
    }
  }
}

type StreamCounts = GeneratedStream['counts'];

/** Generate the stream and its ledger. Same options and seed, same result. */
export function generateStream(options: LocalOptions): GeneratedStream {
  const rng = createRandom(options.seed);
  const consumers = Object.values(TOPIC_CONSUMERS).flat();
  const b: Builder = {
    rng,
    options,
    planned: [],
    expected: new Map(consumers.map((c) => [c, new Map()])),
    faults: new Map(consumers.map((c) => [c, new Map()])),
    seq: 0,
  };
  const counts = { events: 0, caseEvents: 0, payments: 0, duplicates: 0, poison: 0, invalid: 0, outOfOrderCases: 0, faults: 0 };
  // Production times spread over a span proportional to the volume, so chains interleave.
  const span = Math.max(options.events, 10);

  // The draws happen in this order, each step after the one before: the seed fixes them all.
  const { notifications, cases } = planEvents(b, span, counts);
  counts.invalid = planInvalid(b, span);
  counts.duplicates = planDuplicates(b);
  counts.poison = planPoison(b, span);
  const { topics, poison } = layOut(b, consumers);
  counts.faults = [...b.faults.values()].reduce((n, m) => n + m.size, 0);
  return {
    seed: options.seed,
    topics,
    expected: b.expected,
    poison,
    faults: b.faults,
    cases,
    notifications,
    clock: { startsAt: EPOCH, spanMs: span * 1000 },
    counts,
  };
}

/** Payments and case chains until the stream has its events; counts them. */
function planEvents(b: Builder, span: number, counts: StreamCounts): { notifications: Map<string, string>; cases: CaseExpectation[] } {
  const { rng, options } = b;
  const notifications = new Map<string, string>();
  const cases: CaseExpectation[] = [];
  while (counts.events < options.events) {
    const start = rng.next() * span;
    const left = options.events - counts.events;
    if (rng.chance(PAYMENT_SHARE) || left === 1) {
      addPayment(b, start, notifications);
      counts.payments += 1;
      counts.events += 1;
      continue;
    }
    const k = Math.min(rng.int(1, MAX_CHAIN), left);
    const outOfOrder = k >= 2 && rng.chance(options.outOfOrderRate);
    cases.push(addCase(b, k, start, outOfOrder));
    counts.caseEvents += k;
    counts.events += k;
    if (outOfOrder) counts.outOfOrderCases += 1;
  }
  return { notifications, cases };
}

/** Contract violations, each kind in turn; returns how many. */
function planInvalid(b: Builder, span: number): number {
  const invalid = Math.round(b.options.events * b.options.invalidRate);
  for (let i = 0; i < invalid; i++) addInvalid(b, INVALID_KINDS[i % INVALID_KINDS.length]!, b.rng.next() * span);
  return invalid;
}

/** Duplicates: a producer retry writes the same record again, later, to the same partition. Returns how many. */
function planDuplicates(b: Builder): number {
  const { rng, options } = b;
  let duplicates = 0;
  const originals = [...b.planned];
  for (const p of originals) {
    if (!rng.chance(options.duplicateRate) || p.record.label.kind !== 'event') continue;
    b.planned.push({
      ...p,
      time: p.time + rng.int(1, 60),
      record: { ...p.record, label: { kind: 'duplicate', eventId: p.record.label.eventId } },
    });
    duplicates += 1;
  }
  return duplicates;
}

/** Poison records, each kind in turn, on either topic; returns how many. */
function planPoison(b: Builder, span: number): number {
  const { rng, options } = b;
  const poisonCount = Math.round(options.events * options.poisonRate);
  for (let i = 0; i < poisonCount; i++) {
    const kind = POISON_KINDS[i % POISON_KINDS.length]!;
    const topic = rng.chance(0.7) ? CASE_EVENTS_TOPIC : PAYMENT_COMPLETED;
    const time = rng.next() * span;
    b.planned.push({ time, topic, partition: rng.int(0, options.partitions - 1), record: poisonRecord(b, kind, topic, time) });
  }
  return poisonCount;
}

/** Lay the records out in production order; a record's offset is its index in its partition. */
function layOut(b: Builder, consumers: string[]): { topics: Map<string, ProducedRecord[][]>; poison: Map<string, PoisonExpectation[]> } {
  const topics = new Map<string, ProducedRecord[][]>(
    Object.keys(TOPIC_CONSUMERS).map((t) => [t, Array.from({ length: b.options.partitions }, () => [] as ProducedRecord[])]),
  );
  const poison = new Map<string, PoisonExpectation[]>(consumers.map((c) => [c, []]));
  const order = b.planned.map((p, i) => ({ p, i })).sort((x, y) => x.p.time - y.p.time || x.i - y.i);
  for (const { p } of order) {
    const log = topics.get(p.topic)![p.partition]!;
    const offset = log.length;
    log.push({ ...p.record, timestamp: EPOCH + Math.round(p.time * 1000) });
    if (p.record.label.kind === 'poison') {
      for (const consumer of TOPIC_CONSUMERS[p.topic]!) {
        poison.get(consumer)!.push({ topic: p.topic, partition: p.partition, offset, kind: p.record.label.poison });
      }
    }
  }
  return { topics, poison };
}
