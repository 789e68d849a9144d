/**
 * Tracing: one trace per event across the asynchronous gap (docs/tracing.md).
 *
 * The functions make spans with the OpenTelemetry API. The SDK and its OTLP/HTTP exporter
 * are loaded only when OTEL_TRACES_EXPORTER is `otlp` (config.ts): with tracing off the API's
 * tracer is a no-op, no SDK is loaded, and a span started from a stored context is a
 * non-recording span that carries that context on, so the trace context still travels
 * from the producer's header to the events the consumer emits. Everything else about the
 * SDK is configured the standard way, by its own OTEL_* variables: the endpoint and headers
 * (OTEL_EXPORTER_OTLP_*), the sampler (OTEL_TRACES_SAMPLER, _ARG), the service name and
 * resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
 *
 * Lambda freezes the process when the handler returns: every handler flushes before it
 * returns (flushTraces), or its spans would wait in the processor's buffer for a thaw that
 * may never come.
 *
 * The W3C trace context of a record is its `traceparent` (and `tracestate`) header; it is
 * kept with the inbox row as a carrier, { traceparent, tracestate? }, in a column of its
 * own (migration 0172), so that it outlives retries, quarantine, replay and the payload.
 */
import {
  context as otelContext,
  isSpanContextValid,
  ROOT_CONTEXT,
  trace,
  type Context,
  type Span,
  type SpanContext,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';

/** A W3C trace context as the inbox keeps it and a Kafka header carries it. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

export interface TracingConfig {
  /** Where spans go: `otlp` (the OTLP/HTTP exporter) or `none` (the API's no-op tracer). */
  exporter: 'otlp' | 'none';
  /** OTLP over HTTP: protobuf or JSON bodies (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / _PROTOCOL). */
  protocol: 'http/protobuf' | 'http/json';
}

export const TRACING_OFF: TracingConfig = { exporter: 'none', protocol: 'http/protobuf' };

const TRACER_NAME = 'kafka-lambda-inbox';

const propagator = new W3CTraceContextPropagator();

const carrierGetter: TextMapGetter<Record<string, unknown>> = {
  get: (carrier, key) => {
    const value = carrier[key];
    return typeof value === 'string' ? value : undefined;
  },
  keys: (carrier) => Object.keys(carrier),
};

const carrierSetter: TextMapSetter<Record<string, string>> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

/** The tracer every function's spans come from. */
export function tracer(): Tracer {
  return trace.getTracer(TRACER_NAME);
}

/**
 * The span context a carrier names: from a record's decoded headers, or a stored carrier.
 * Undefined when it has none, or a malformed one (the W3C propagator's own checks: version,
 * lengths, hex, an all-zero id), or a header repeated with different values.
 */
export function spanContextOf(carrier: unknown): SpanContext | undefined {
  if (typeof carrier !== 'object' || carrier === null) return undefined;
  const extracted = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, carrier as Record<string, unknown>, carrierGetter));
  return extracted !== undefined && isSpanContextValid(extracted) ? extracted : undefined;
}

/** The carrier of a span context, as the W3C propagator writes it (null for an invalid one). */
export function carrierOf(spanContext: SpanContext | undefined): TraceCarrier | null {
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return null;
  const out: Record<string, string> = {};
  propagator.inject(trace.setSpanContext(ROOT_CONTEXT, spanContext), out, carrierSetter);
  return out.traceparent === undefined ? null : (out as unknown as TraceCarrier);
}

/**
 * A record's trace context from its decoded headers, normalized as the propagator writes it;
 * null when it has none or a malformed one (the record is stored as always, without one).
 */
export function carrierFromHeaders(headers: Record<string, unknown>): TraceCarrier | null {
  if (headers.traceparent === undefined) return null;
  return carrierOf(spanContextOf(headers));
}

/** The context whose active span is the carrier's (the parent of what starts in it); the root when there is none. */
export function contextOf(carrier: unknown): Context {
  const spanContext = spanContextOf(carrier);
  return spanContext === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, spanContext);
}

/** The context with `span` active, for what starts under it. */
export function contextWith(span: Span, parent: Context = otelContext.active()): Context {
  return trace.setSpan(parent, span);
}

/** The Powertools log keys of a span: its trace and span ids, when it has a valid context. */
export function logKeysOf(span: Span | undefined): { trace_id?: string; span_id?: string } {
  const spanContext = span?.spanContext();
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

interface Provider {
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

let provider: Provider | undefined;

/**
 * Start the SDK once per process (cold start) when the configuration asks for spans, with
 * the OTLP/HTTP exporter of its protocol, or `exporter` (tests, the local run). The SDK's
 * modules load only here.
 */
export async function startTracing(
  config: TracingConfig,
  options: { exporter?: SpanExporter; serviceName?: string; batch?: boolean } = {},
): Promise<void> {
  if (provider !== undefined) return;
  if (config.exporter === 'none' && options.exporter === undefined) return;
  const [{ BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor }, { resourceFromAttributes, detectResources, envDetector }] =
    await Promise.all([import('@opentelemetry/sdk-trace-base'), import('@opentelemetry/resources')]);
  const exporter = options.exporter ?? (await otlpExporter(config.protocol));
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the function's own name.
  const resource = resourceFromAttributes({ 'service.name': options.serviceName ?? TRACER_NAME }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const processor = options.batch === false ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter);
  const sdk = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  trace.setGlobalTracerProvider(sdk);
  provider = sdk;
}

async function otlpExporter(protocol: TracingConfig['protocol']): Promise<SpanExporter> {
  if (protocol === 'http/json') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    return new OTLPTraceExporter();
  }
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
  return new OTLPTraceExporter();
}

/** Export what the invocation's spans left in the processor, before the handler returns. */
export async function flushTraces(): Promise<void> {
  await provider?.forceFlush();
}

/** Stop tracing (tests, the local run): flush, and the API's no-op tracer again. */
export async function stopTracing(): Promise<void> {
  const stopping = provider;
  provider = undefined;
  trace.disable();
  await stopping?.shutdown();
}
