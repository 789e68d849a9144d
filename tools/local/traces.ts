/**
 * The local run's traces (docs/tracing.md): the functions export to an in-process exporter,
 * each produced event carries the W3C context of a producer's send span (as an instrumented
 * producer's record would), and the report draws one event's trace as a waterfall and says
 * where the time of all traced events went.
 *
 * Only span names, timings, ids and outcomes are read: never an event's payload.
 */
import { SpanKind, type HrTime } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { carrierOf, startTracing, stopTracing, TRACING_OFF, tracer } from '../../functions/lib/tracing';
import type { GeneratedStream } from './generator';

export interface RunTracing {
  exporter: InMemorySpanExporter;
  stop(): Promise<void>;
}

/** Start the functions' tracing into memory for the run. */
export async function startRunTracing(): Promise<RunTracing> {
  const exporter = new InMemorySpanExporter();
  // Spans go to memory as they end: the report reads them as the run ends.
  await startTracing(TRACING_OFF, { exporter, serviceName: 'npm-start', batch: false });
  return { exporter, stop: () => stopTracing() };
}

/**
 * A producer's send span for every event record, at the moment its record is written to
 * the topic (`producedAt`, epoch ms), its context put into the record's headers.
 */
export function traceProducers(stream: GeneratedStream, producedAt: (timestamp: number) => number): void {
  for (const [topic, partitions] of stream.topics) {
    for (const records of partitions) {
      for (const record of records) {
        if (record.label.kind === 'poison') continue;
        const at = producedAt(record.timestamp);
        const span = tracer().startSpan(`send ${topic}`, {
          kind: SpanKind.PRODUCER,
          startTime: at,
          attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': topic, 'messaging.message.id': record.label.eventId },
        });
        span.end(at);
        Object.assign(record.headers, carrierOf(span.spanContext()) ?? {});
      }
    }
  }
}

export interface WaterfallBar {
  label: string;
  /** Milliseconds from the trace's start. */
  startMs: number;
  endMs: number;
  kind: 'produced' | 'stored' | 'waited' | 'processed' | 'retried' | 'published';
  detail: string;
}

export interface TraceBreakdown {
  /** Where the traced events' time went, summed over them, by what they were waiting for or doing. */
  parts: { label: string; ms: number; share: number }[];
  events: number;
}

export interface RunTraces {
  /** One event's trace: the most eventful one (published, and retried, where there is one). */
  waterfall: { traceId: string; eventId: string; bars: WaterfallBar[] } | null;
  breakdown: TraceBreakdown;
  spans: number;
}

const ms = (t: HrTime) => t[0] * 1000 + t[1] / 1e6;

interface EventSpans {
  send: ReadableSpan | undefined;
  /** The ingest batches that linked this event, by consumer. */
  stored: Map<string, ReadableSpan>;
  /** Processing attempts, by consumer, in order. */
  attempts: Map<string, ReadableSpan[]>;
  published: ReadableSpan[];
}

/** The spans of each traced event, by its trace id. */
function byTrace(spans: readonly ReadableSpan[]): Map<string, EventSpans> {
  const out = new Map<string, EventSpans>();
  const of = (traceId: string) => {
    let e = out.get(traceId);
    if (e === undefined) out.set(traceId, (e = { send: undefined, stored: new Map(), attempts: new Map(), published: [] }));
    return e;
  };
  for (const s of spans) {
    const traceId = s.spanContext().traceId;
    const consumer = String(s.attributes['inbox.consumer'] ?? '');
    if (s.kind === SpanKind.PRODUCER && s.name.startsWith('send ')) of(traceId).send = s;
    else if (s.kind === SpanKind.PRODUCER && s.name.startsWith('publish ')) of(traceId).published.push(s);
    else if (s.kind === SpanKind.CONSUMER && s.attributes['inbox.outcome'] !== undefined) {
      const list = of(traceId).attempts.get(consumer) ?? [];
      list.push(s);
      of(traceId).attempts.set(consumer, list);
    } else if (s.kind === SpanKind.CONSUMER && s.links.length > 0) {
      // An ingest batch: stored for every event it linked (the first batch that stored it).
      for (const link of s.links) {
        const e = of(link.context.traceId);
        if (!e.stored.has(consumer)) e.stored.set(consumer, s);
      }
    }
  }
  for (const e of out.values()) for (const list of e.attempts.values()) list.sort((a, b) => ms(a.startTime) - ms(b.startTime));
  return out;
}

/** The waterfall of one event: its send, each consumer's store, wait, attempts, and what was published. */
function waterfallOf(traceId: string, e: EventSpans): NonNullable<RunTraces['waterfall']> {
  const t0 = e.send === undefined ? Math.min(...[...e.stored.values()].map((s) => ms(s.startTime))) : ms(e.send.startTime);
  const bars: WaterfallBar[] = [];
  const bar = (label: string, kind: WaterfallBar['kind'], from: number, to: number, detail: string) =>
    bars.push({ label, kind, startMs: from - t0, endMs: Math.max(to, from) - t0, detail });
  if (e.send !== undefined) bar('produced', 'produced', ms(e.send.startTime), ms(e.send.endTime), e.send.name);
  for (const [consumer, stored] of e.stored) {
    bar(`${consumer}: delivered and stored`, 'stored', ms(stored.startTime), ms(stored.endTime), stored.name);
    const attempts = e.attempts.get(consumer) ?? [];
    let last = ms(stored.endTime);
    attempts.forEach((a, i) => {
      const outcome = String(a.attributes['inbox.outcome']);
      const code = a.attributes['inbox.error_code'];
      bar(`${consumer}: ${i === 0 ? 'waited for a worker' : 'waited to retry'}`, i === 0 ? 'waited' : 'retried', last, ms(a.startTime), '');
      bar(
        `${consumer}: attempt ${String(a.attributes['inbox.attempt'])}`,
        'processed',
        ms(a.startTime),
        ms(a.endTime),
        `${outcome}${code === undefined ? '' : ` ${String(code)}`}`,
      );
      last = ms(a.endTime);
    });
  }
  for (const p of e.published)
    bar(`${String(p.attributes['inbox.consumer'])}: published`, 'published', ms(p.startTime), ms(p.endTime), p.name);
  return { traceId, eventId: String(e.send?.attributes['messaging.message.id'] ?? ''), bars };
}

/**
 * How eventful a trace is: a publish counts most (the whole journey, to the next topic), then
 * a retry or few (more would crowd the picture), then the consumers it reached.
 */
function eventfulness(e: EventSpans): number {
  const attempts = [...e.attempts.values()];
  const retries = attempts.reduce((n, a) => n + Math.max(0, a.length - 1), 0);
  return (e.published.length > 0 ? 10_000 : 0) + Math.min(retries, 3) * 100 + attempts.length;
}

/** Where the time went: for each event and consumer, from its store to its last attempt, and on to its publish. */
function breakdownOf(events: Map<string, EventSpans>): TraceBreakdown {
  const totals = new Map<string, number>([
    ['waiting for a worker', 0],
    ['waiting for a predecessor', 0],
    ['waiting to retry', 0],
    ['processing (claim to commit)', 0],
    ['waiting for the relay', 0],
    ['publishing', 0],
  ]);
  const add = (label: string, v: number) => totals.set(label, totals.get(label)! + Math.max(0, v));
  let counted = 0;
  for (const e of events.values()) {
    for (const [consumer, attempts] of e.attempts) {
      const stored = e.stored.get(consumer);
      if (stored === undefined || attempts.length === 0) continue;
      counted += 1;
      add('waiting for a worker', ms(attempts[0]!.startTime) - ms(stored.endTime));
      attempts.forEach((a, i) => {
        add('processing (claim to commit)', ms(a.endTime) - ms(a.startTime));
        const next = attempts[i + 1];
        if (next === undefined) return;
        const gap = ms(next.startTime) - ms(a.endTime);
        add(a.attributes['inbox.error_code'] === 'AGGREGATE_VERSION_GAP' ? 'waiting for a predecessor' : 'waiting to retry', gap);
      });
      for (const p of e.published.filter((x) => x.attributes['inbox.consumer'] === consumer)) {
        add('waiting for the relay', ms(p.startTime) - ms(attempts.at(-1)!.endTime));
        add('publishing', ms(p.endTime) - ms(p.startTime));
      }
    }
  }
  const sum = [...totals.values()].reduce((a, b) => a + b, 0);
  return { events: counted, parts: [...totals].map(([label, v]) => ({ label, ms: v, share: sum === 0 ? 0 : v / sum })) };
}

/** The report's view of the run's spans. */
export function runTraces(exporter: InMemorySpanExporter): RunTraces {
  const spans = exporter.getFinishedSpans();
  const events = byTrace(spans);
  const complete = [...events].filter(([, e]) => e.send !== undefined && e.stored.size > 0 && e.attempts.size > 0);
  const [chosen] = complete.sort(([, a], [, b]) => eventfulness(b) - eventfulness(a));
  return {
    waterfall: chosen === undefined ? null : waterfallOf(chosen[0], chosen[1]),
    breakdown: breakdownOf(events),
    spans: spans.length,
  };
}
