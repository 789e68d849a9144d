/**
 * One trace per event across the asynchronous gap (docs/tracing.md), with an in-memory
 * exporter: the producer's traceparent → the ingest batch's link → the stored context →
 * the worker's row span (a child of the producer's span), each retry another span of the
 * same trace → the emitted event's traceparent, published by the relay as a header.
 */
import { randomUUID } from 'node:crypto';
import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { workerRoleOf, relayRoleOf } from '../../../functions/lib/database-roles';
import { spanContextOf, startTracing, stopTracing, TRACING_OFF } from '../../../functions/lib/tracing';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { caseAccepted, CASE_TOPIC, ingestFor, truncateAll } from '../ingest/support';
import { CountingProducer, relay } from '../outbox/support';
import { withTrigger, work } from '../worker/support';

const db = await useTestDatabase();
const caseSla = getConsumer('case-sla');
const exporter = new InMemorySpanExporter();

beforeAll(() => startTracing(TRACING_OFF, { exporter, batch: false, serviceName: 'trace-test' }));
afterAll(() => stopTracing());
beforeEach(async () => {
  exporter.reset();
  await truncateAll(db.sql);
  await db.sql`truncate integration.outbox, case_core.sla_obligation, case_core.case_audit`;
});

/** A producer's span context, as its traceparent header carries it. */
function producerContext(): { traceparent: string; traceId: string; spanId: string } {
  const traceId = randomUUID().replaceAll('-', '');
  const spanId = randomUUID().replaceAll('-', '').slice(0, 16);
  return { traceparent: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

let offset = 0;
function record(eventId: string, headers: Record<string, string>) {
  return mskRecord({
    topic: CASE_TOPIC,
    partition: 0,
    offset: offset++,
    key: `case_${eventId}`,
    value: caseAccepted(eventId, { aggregateId: `case_${eventId}` }),
    headers,
  });
}

const spans = () => exporter.getFinishedSpans();
const named = (prefix: string) => spans().filter((s) => s.name.startsWith(prefix));
const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId;

describe('ingest', () => {
  it('one CONSUMER span per batch, linked to each record’s producer context; the context kept with the row', async () => {
    const [a, b] = [producerContext(), producerContext()];
    const event = mskEvent([
      record('evt_t1', { traceparent: a.traceparent, tracestate: 'vendor=1' }),
      record('evt_t2', { traceparent: b.traceparent }),
      record('evt_t3', {}),
      record('evt_t4', { traceparent: '00-not-a-trace-context' }),
    ]);

    const report = await ingestFor(db, caseSla)(event);

    expect(report.response).toEqual({ batchItemFailures: [] });
    const [batch, ...others] = named('process regulatory.case.events.v1');
    expect(others).toEqual([]);
    expect(batch!.kind).toBe(SpanKind.CONSUMER);
    expect(batch!.attributes).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.destination.name': CASE_TOPIC,
      'messaging.consumer.group.name': 'case-sla',
      'messaging.batch.message_count': 4,
      'inbox.inserted': 4,
    });
    expect(batch!.links.map((l) => [l.context.traceId, l.context.spanId, l.attributes?.['messaging.message.id']])).toEqual([
      [a.traceId, a.spanId, 'evt_t1'],
      [b.traceId, b.spanId, 'evt_t2'],
    ]);
    // Every record stored, with its context or none (a missing or malformed header: none).
    expect(await db.sql`select event_id, trace_context from integration.consumer_inbox order by event_id`).toEqual([
      { event_id: 'evt_t1', trace_context: { traceparent: a.traceparent, tracestate: 'vendor=1' } },
      { event_id: 'evt_t2', trace_context: { traceparent: b.traceparent } },
      { event_id: 'evt_t3', trace_context: null },
      { event_id: 'evt_t4', trace_context: null },
    ]);
  });
});

describe('worker and relay', () => {
  it('processes each row in a span whose parent is its producer’s, and the emitted event carries that trace to Kafka', async () => {
    const p = producerContext();
    await ingestFor(db, caseSla)(mskEvent([record('evt_w1', { traceparent: p.traceparent }), record('evt_w2', {})]));
    exporter.reset();

    expect(await work(db.as(workerRoleOf(caseSla)), caseSla)).toMatchObject({ processed: 2 });

    const rowSpans = named('process regulatory.case.events.v1');
    const [traced] = rowSpans.filter((s) => s.attributes['messaging.message.id'] === 'evt_w1');
    expect(traced!.kind).toBe(SpanKind.CONSUMER);
    expect(traced!.spanContext().traceId).toBe(p.traceId);
    expect(parentOf(traced!)).toBe(p.spanId);
    expect(traced!.attributes).toMatchObject({ 'inbox.consumer': 'case-sla', 'inbox.attempt': 1, 'inbox.outcome': 'PROCESSED' });
    // A row whose producer sent nothing is a child of the batch's span; the batch links to every row.
    const [batch] = named('batch case-sla');
    const [untraced] = rowSpans.filter((s) => s.attributes['messaging.message.id'] === 'evt_w2');
    expect(parentOf(untraced!)).toBe(batch!.spanContext().spanId);
    expect(batch!.links.map((l) => l.context.spanId).sort()).toEqual([traced!.spanContext().spanId, untraced!.spanContext().spanId].sort());

    // The emitted obligation event: stored with the processing span's context, published with it.
    const [outbox] = await db.sql<{ trace_context: { traceparent: string } }[]>`
      select trace_context from integration.outbox where source_event_id = 'evt_w1'`;
    expect(spanContextOf(outbox!.trace_context)).toMatchObject({ traceId: p.traceId, spanId: traced!.spanContext().spanId });
    const producer = new CountingProducer();
    expect(await relay(db.as(relayRoleOf(caseSla)), producer)).toMatchObject({ published: 2 });
    const published = producer.accepted.find((m) => m.headers.traceparent?.includes(p.traceId));
    const [publish] = named('publish').filter((s) => s.spanContext().traceId === p.traceId);
    expect(publish!.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(publish!)).toBe(traced!.spanContext().spanId);
    expect(published!.headers.traceparent).toBe(`00-${p.traceId}-${publish!.spanContext().spanId}-01`);
  });

  it('makes every attempt of a retried row a span of the producer’s trace, with its outcome', async () => {
    const p = producerContext();
    await ingestFor(db, caseSla)(mskEvent([record('evt_r1', { traceparent: p.traceparent })]));
    await withTrigger(
      db.sql,
      {
        name: 'refuse_once',
        on: 'case_core.sla_obligation',
        when: 'before insert',
        body: "raise exception 'busy' using errcode = '40001';",
      },
      () => work(db.as(workerRoleOf(caseSla)), caseSla),
    );
    await db.sql`update integration.consumer_inbox set next_attempt_at = now() where event_id = 'evt_r1'`;
    await work(db.as(workerRoleOf(caseSla)), caseSla);

    const attempts = named('process').filter((s) => s.attributes['messaging.message.id'] === 'evt_r1');
    expect(
      attempts.map((s) => [s.spanContext().traceId, parentOf(s), s.attributes['inbox.attempt'], s.attributes['inbox.outcome']]),
    ).toEqual([
      [p.traceId, p.spanId, 1, 'RETRY_PENDING'],
      [p.traceId, p.spanId, 2, 'PROCESSED'],
    ]);
    expect(attempts[0]!.attributes['inbox.error_code']).toBe('DB_TRANSIENT');
  });
});

describe('with tracing off', () => {
  it('still carries the producer’s context to the emitted event (no span is recorded)', async () => {
    await stopTracing();
    try {
      const p = producerContext();
      await ingestFor(db, caseSla)(mskEvent([record('evt_o1', { traceparent: p.traceparent })]));
      await work(db.as(workerRoleOf(caseSla)), caseSla);
      const producer = new CountingProducer();
      await relay(db.as(relayRoleOf(caseSla)), producer);
      expect(producer.accepted.map((m) => m.headers.traceparent)).toEqual([p.traceparent]);
      expect(spans()).toEqual([]);
    } finally {
      await startTracing(TRACING_OFF, { exporter, batch: false, serviceName: 'trace-test' });
    }
  });
});
