/**
 * The processing spans of a batch's rows (docs/tracing.md): one per row that runs, whose
 * parent is the trace context its producer sent, kept with the row (migration 0172), so
 * that an event's processing, minutes later and in another function, is part of the
 * producer's trace, and each retry is another span of it. A row whose producer sent none
 * is a child of the batch's span instead. Used by the worker and by an inline consumer's
 * ingest.
 *
 * A span ends with its row's outcome, once that outcome committed. A row handed back
 * without its outcome committing (behind a failed row of its run, out of time, lost) did
 * not run as far as the inbox is concerned: its span is never ended, so never exported.
 */
import { SpanKind, SpanStatusCode, trace, type Span, type SpanContext } from '@opentelemetry/api';
import type { InboxRow, Outcome } from '../inbox/types';
import { carrierOf, contextOf, logKeysOf, tracer, type TraceCarrier } from '../lib/tracing';

export interface RowSpans {
  /** The context a row's handler runs in, and the events it emits carry (null: none at all). */
  traceOf(row: InboxRow): TraceCarrier | null;
  /** End the spans of rows whose outcome committed, each with that outcome. */
  end(results: readonly { row: InboxRow; outcome: Outcome }[]): void;
  /** The span contexts of the rows that ended, for the batch's links to them. */
  contexts(): SpanContext[];
  /** A row's log keys: its span's trace and span ids (none when tracing is off and it has no context). */
  logKeys(row: InboxRow): { trace_id?: string; span_id?: string };
}

function rowSpan(row: InboxRow, batch: Span | undefined): Span {
  const producer = contextOf(row.trace_context);
  const parent = trace.getSpan(producer) !== undefined || batch === undefined ? producer : trace.setSpan(producer, batch);
  return tracer().startSpan(
    `process ${row.topic_name}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'messaging.system': 'kafka',
        'messaging.operation.type': 'process',
        'messaging.destination.name': row.topic_name,
        'messaging.destination.partition.id': String(row.partition_no),
        'messaging.kafka.offset': row.offset_no,
        'messaging.consumer.group.name': row.consumer_name,
        'messaging.message.id': row.event_id,
        'inbox.consumer': row.consumer_name,
        'inbox.event_type': row.event_type,
        'inbox.event_version': row.event_version,
        'inbox.aggregate_id': row.aggregate_id,
        'inbox.attempt': row.attempt_count,
      },
    },
    parent,
  );
}

/** Spans for `rows`, started now; `batch` is the parent of those whose producer sent no context. */
export function startRowSpans(rows: readonly InboxRow[], batch?: Span): RowSpans {
  const spans = new Map<string, Span>();
  const ended: SpanContext[] = [];
  const spanOf = (row: InboxRow): Span => {
    let span = spans.get(row.inbox_id);
    if (span === undefined) spans.set(row.inbox_id, (span = rowSpan(row, batch)));
    return span;
  };
  for (const row of rows) spanOf(row);
  return {
    traceOf: (row) => carrierOf(spanOf(row).spanContext()),
    end(results) {
      for (const { row, outcome } of results) {
        const span = spans.get(row.inbox_id);
        if (span === undefined) continue;
        span.setAttribute('inbox.outcome', outcome.status);
        if ('errorCode' in outcome) {
          span.setAttribute('inbox.error_code', outcome.errorCode);
          span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.errorCode });
        }
        span.end();
        ended.push(span.spanContext());
      }
    },
    contexts: () => ended,
    logKeys: (row) => logKeysOf(spans.get(row.inbox_id)),
  };
}
