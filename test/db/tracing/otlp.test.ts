/**
 * The bundled functions exporting over OTLP/HTTP to a receiver on this machine, configured
 * only by OpenTelemetry's own variables, in both protocols. Each invocation runs in a
 * process that exits the moment its handler returns (as a frozen Lambda exports nothing):
 * the spans that arrive were flushed before it returned.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { ingestRoleOf, workerRoleOf } from '../../../functions/lib/database-roles';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedExport } from '../../../tools/otlp-receiver';
import { bundledFunctions, type Bundles } from '../../helpers/bundles';
import { useTestDatabase } from '../../helpers/db';
import { caseAccepted, CASE_TOPIC, truncateAll } from '../ingest/support';

const db = await useTestDatabase();
const caseProjection = getConsumer('case-projection');
let bundles: Bundles;

let receiver: OtlpReceiver;
let received: ReceivedExport[];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  received = receiver.received;
  bundles = await bundledFunctions('otlp');
}, 120_000);
afterAll(async () => {
  await bundles.remove();
  await receiver.close();
});
beforeEach(async () => {
  received.length = 0;
  await truncateAll(db.sql);
});

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PRODUCER_SPAN = '00f067aa0ba902b7';

function otelEnv(protocol: 'http/json' | 'http/protobuf'): Record<string, string> {
  return {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'inbox-otlp-test',
    CONSUMER_NAME: caseProjection.name,
  };
}

/** Every span name in what arrived, and the trace ids (JSON: as hex; protobuf: as bytes). */
function spansIn(r: ReceivedExport): { names: string[]; traceIds: string[] } {
  if (r.contentType?.includes('json')) {
    const doc = JSON.parse(r.body.toString('utf8')) as {
      resourceSpans: { scopeSpans: { spans: { name: string; traceId: string }[] }[] }[];
    };
    const spans = doc.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans));
    return { names: spans.map((s) => s.name), traceIds: spans.map((s) => s.traceId) };
  }
  // Protobuf: strings and bytes fields are stored as they are, so the names and the trace id's 16 bytes show.
  const text = r.body.toString('latin1');
  const names = ['process regulatory.case.events.v1', 'batch case-projection', 'worker case-projection'].filter((n) => text.includes(n));
  const traceIds = text.includes(Buffer.from(TRACE_ID, 'hex').toString('latin1')) ? [TRACE_ID] : [];
  return { names, traceIds };
}

describe.each(['http/json', 'http/protobuf'] as const)('OTLP over HTTP (%s)', (protocol) => {
  it('receives the ingest batch span and the worker’s spans, flushed before each invocation returned', async () => {
    const event = mskEvent([
      mskRecord({
        topic: CASE_TOPIC,
        partition: 0,
        offset: 1,
        key: 'case_o1',
        value: caseAccepted('evt_otlp_1'),
        headers: { traceparent: `00-${TRACE_ID}-${PRODUCER_SPAN}-01` },
      }),
    ]);

    const ingest = await bundles.invoke('ingest', event, { DATABASE_URL: db.urlAs(ingestRoleOf(caseProjection)), ...otelEnv(protocol) });
    expect(ingest).toEqual({ batchItemFailures: [] });
    const afterIngest = received.length;
    expect(afterIngest).toBeGreaterThan(0);

    const worker = await bundles.invoke(
      'worker',
      { source: 'schedule' },
      { DATABASE_URL: db.urlAs(workerRoleOf(caseProjection)), WORKER_IDLE_MS: '0', ...otelEnv(protocol) },
    );
    expect(worker).toMatchObject({ processed: 1 });

    for (const r of received) {
      expect(r.path).toBe('/v1/traces');
      expect(r.contentType).toContain(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
    }
    const ingestSpans = received.slice(0, afterIngest).map(spansIn);
    const workerSpans = received.slice(afterIngest).map(spansIn);
    expect(ingestSpans.flatMap((s) => s.names)).toContain('process regulatory.case.events.v1');
    expect(workerSpans.flatMap((s) => s.names)).toEqual(
      expect.arrayContaining(['process regulatory.case.events.v1', 'batch case-projection', 'worker case-projection']),
    );
    // The row's processing span belongs to the producer's trace.
    expect(workerSpans.flatMap((s) => s.traceIds)).toContain(TRACE_ID);
  });
});
