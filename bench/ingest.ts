/**
 * `npm run bench -- ingest [--records 20000] [--batch 500] [--rounds 3]`
 *
 * Records per second through the ingest handler (warm, 1 KiB payloads, 500-record MSK
 * batches, one invocation after another as one container runs them), against the fastest
 * way this table takes the same rows on this machine: one COPY of all of them. Also the
 * bare set-based INSERT of pre-decoded rows, which shows what decoding costs, and the same
 * events as Avro values in the Confluent wire format (writer schema from an in-process
 * Confluent REST registry, fetched once and cached as in a container), beside the JSON ones;
 * and the JSON handler with tracing on: the OpenTelemetry SDK exporting OTLP/HTTP (protobuf)
 * to a receiver on this machine, flushed before each invocation returns, as the function does.
 * Every record carries a producer's `traceparent`, so the batch span has a link per record.
 *
 * Each phase starts from an empty table (TRUNCATE) and runs `--rounds` times; the median
 * is printed. Figures are as measured on a shared machine: compare ratios, not absolutes.
 */
import { parseArgs } from 'node:util';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import postgres from 'postgres';
import { getConsumer } from '../functions/consumers';
import { decodeRecord } from '../functions/ingest/decode';
import { createIngestHandler } from '../functions/ingest/ingest';
import type { KafkaEvent } from '../functions/ingest/types';
import { insertInboxBatchCount, type InboxInsert } from '../functions/inbox/insert-batch';
import { TYPES, type Sql } from '../functions/lib/db';
import { flushTraces, startTracing, stopTracing } from '../functions/lib/tracing';
import { migrate } from '../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../functions/lib/migration-files';
import { benchServer } from './_server';
import { mskEvent, recordsOf, spreadRecords } from '../tools/msk-events';
import { binaryValues } from '../functions/wings/decoding/binary-values';
import { confluentFetcher } from '../functions/wings/decoding/confluent-registry';
import { createSchemaSource } from '../functions/wings/decoding/schema-source';
import { startOtlpReceiver } from '../tools/otlp-receiver';
import { avroEncoder, CASE_AVRO_SCHEMA, caseEventToAvro, confluentFrame, startLocalRegistry } from '../tools/registry-values';

// A benchmark's metrics go nowhere; Powertools would print them to stdout.
process.env.POWERTOOLS_METRICS_DISABLED ??= 'true';

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '20000' },
    batch: { type: 'string', default: '500' },
    rounds: { type: 'string', default: '3' },
  },
});
const RECORDS = Number(args.records);
const BATCH = Number(args.batch);
const ROUNDS = Number(args.rounds);
const PARTITIONS = 8;
const TOPIC = 'regulatory.case.events.v1';
const consumer = getConsumer('case-projection');

function envelope(n: number) {
  const caseId = `case_${n}`;
  const payload = { caseId, acceptedAt: '2026-07-03T09:15:30Z', note: '' };
  payload.note = 'x'.repeat(1024 - JSON.stringify(payload).length); // the payload is 1 KiB of JSON
  return {
    eventId: `evt_${n.toString().padStart(9, '0')}`,
    eventType: 'regulatory.case.accepted.v1',
    eventVersion: 1,
    occurredAt: '2026-07-03T09:15:30Z',
    producer: 'case-command-service',
    correlationId: `corr_${n}`,
    aggregateType: 'case',
    aggregateId: caseId,
    partitionKey: caseId,
    payload,
  };
}

/** COPY text format: backslash, tab, newline and carriage return escaped; \N for null. */
function copyField(v: unknown): string {
  if (v === null || v === undefined) return '\\N';
  const s = typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
  return s.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r'));
}

const COPY_COLUMNS = [
  'consumer_name',
  'event_id',
  'event_type',
  'event_version',
  'aggregate_type',
  'aggregate_id',
  'aggregate_version',
  'partition_key',
  'record_key',
  'tenant_id',
  'topic_name',
  'partition_no',
  'offset_no',
  'correlation_id',
  'causation_id',
  'producer',
  'occurred_at',
  'status',
  'payload',
  'headers',
] as const;

function copyLine(r: InboxInsert): string {
  const payload = (JSON.parse(r.envelopeJson) as { payload: unknown }).payload;
  return (
    [
      consumer.name,
      r.eventId,
      r.eventType,
      r.eventVersion,
      r.aggregateType,
      r.aggregateId,
      r.aggregateVersion,
      r.partitionKey,
      r.recordKey,
      r.tenantId,
      r.topic,
      r.partition,
      r.offset,
      r.correlationId,
      r.causationId,
      r.producer,
      r.occurredAt,
      'RECEIVED',
      payload,
      r.headers,
    ]
      .map(copyField)
      .join('\t') + '\n'
  );
}

/** The bench's case envelope as Avro: the case schema with the payload's 1 KiB `note`. */
const BENCH_AVRO_SCHEMA = {
  ...CASE_AVRO_SCHEMA,
  name: 'BenchCaseEvent',
  fields: CASE_AVRO_SCHEMA.fields.map((f) =>
    f.name === 'payload'
      ? {
          name: 'payload',
          type: {
            type: 'record',
            name: 'BenchPayload',
            fields: [
              { name: 'caseId', type: 'string' },
              { name: 'acceptedAt', type: { type: 'long', logicalType: 'timestamp-millis' } },
              { name: 'note', type: 'string' },
            ],
          },
        }
      : f,
  ),
};
const AVRO_SCHEMA_ID = 1;
const encodeAvro = avroEncoder(BENCH_AVRO_SCHEMA);
function avroValue(n: number): Buffer {
  const e = envelope(n);
  return confluentFrame(
    AVRO_SCHEMA_ID,
    encodeAvro({
      ...caseEventToAvro(e),
      payload: { caseId: e.payload.caseId, acceptedAt: BigInt(Date.parse(e.payload.acceptedAt)), note: e.payload.note },
    }),
  );
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

const server = await benchServer();
const receiver = await startOtlpReceiver();
// The exporter reads its endpoint from OpenTelemetry's own variable, as in the function.
process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
const registry = await startLocalRegistry([{ id: AVRO_SCHEMA_ID, schema: JSON.stringify(BENCH_AVRO_SCHEMA) }]);
const sql = postgres(server.url, { max: 4, onnotice: () => {}, types: TYPES }) as unknown as Sql;
try {
  await migrate(sql, await loadMigrations(MIGRATIONS_DIR));
  const truncate = () => sql`truncate integration.consumer_inbox, integration.consumer_raw_poison`.then(() => undefined);

  const records = spreadRecords({
    topic: TOPIC,
    partitions: PARTITIONS,
    count: RECORDS,
    value: (n) => envelope(n),
    key: (n) => `case_${n}`,
    headers: (n) => ({ traceparent: `00-${n.toString(16).padStart(32, '0')}-00f067aa0ba902b7-01` }),
  });
  const events: KafkaEvent[] = [];
  for (let i = 0; i < records.length; i += BATCH) events.push(mskEvent(records.slice(i, i + BATCH)));
  const avroRecords = spreadRecords({
    topic: TOPIC,
    partitions: PARTITIONS,
    count: RECORDS,
    value: (n) => avroValue(n),
    key: (n) => `case_${n}`,
    headers: (n) => ({ traceparent: `00-${n.toString(16).padStart(32, '0')}-00f067aa0ba902b7-01` }),
  });
  const avroEvents: KafkaEvent[] = [];
  for (let i = 0; i < avroRecords.length; i += BATCH) avroEvents.push(mskEvent(avroRecords.slice(i, i + BATCH)));
  const decoded = events.map((e) =>
    recordsOf(e).map((r) => {
      const d = decodeRecord(r, consumer, { maxPayloadBytes: 256 * 1024 });
      if (d.kind !== 'valid')
        throw new Error(`bench record ${r.offset} did not decode: ${d.kind === 'poison' ? d.row.errorCode : d.reason}`);
      return d.row;
    }),
  );
  const copyText = decoded.flat().map(copyLine).join('');

  const handler = createIngestHandler({
    sql,
    consumer,
    config: { maxPayloadBytes: 256 * 1024 },
    logger: new Logger({ serviceName: 'bench', logLevel: 'SILENT' }),
    metrics: new Metrics({ namespace: 'Bench', serviceName: 'bench' }),
    // As the handler plugs it in for every consumer.
    valueDecoder: binaryValues(consumer),
  });
  const avroHandler = createIngestHandler({
    sql,
    consumer,
    config: { maxPayloadBytes: 256 * 1024 },
    logger: new Logger({ serviceName: 'bench', logLevel: 'SILENT' }),
    metrics: new Metrics({ namespace: 'Bench', serviceName: 'bench' }),
    valueDecoder: binaryValues(consumer, createSchemaSource(confluentFetcher({ url: registry.url, timeoutMs: 2_000 }))),
  });
  let request = 0;
  /** Every JSON batch through the handler, flushing traces as the function does before it returns (nothing to flush with tracing off). */
  const throughHandler = async (what: string) => {
    for (const e of events) {
      const r = await handler(e, { awsRequestId: `bench-${++request}` });
      await flushTraces();
      if (r.batchItemFailures.length > 0) throw new Error(`bench ${what} batch reported failures`);
    }
  };

  const phases: Record<string, () => Promise<void>> = {
    handler: () => throughHandler('JSON'),
    traced: async () => {
      await startTracing({ exporter: 'otlp', protocol: 'http/protobuf' }, { serviceName: 'bench' });
      try {
        await throughHandler('traced');
      } finally {
        await stopTracing();
      }
    },
    avro: async () => {
      for (const e of avroEvents) {
        const r = await avroHandler(e, { awsRequestId: `bench-${++request}` });
        if (r.batchItemFailures.length > 0) throw new Error('bench Avro batch reported failures');
      }
    },
    insert: async () => {
      // Exactly the statement the handler sends for a batch without poison: one INSERT, no
      // BEGIN/COMMIT around it (a single statement is atomic by itself), no RETURNING.
      for (const rows of decoded) await insertInboxBatchCount(sql, consumer.name, rows);
    },
    copy: async () => {
      const writable = await sql`copy integration.consumer_inbox (${sql(COPY_COLUMNS as unknown as string[])}) from stdin`.writable();
      await new Promise<void>((resolve, reject) => {
        writable.on('error', reject);
        writable.on('finish', resolve);
        writable.end(copyText);
      });
    },
  };

  // Warm up every path (JIT, plans, buffers; the tracing SDK's modules, loaded once per
  // process as at a cold start), then measure from empty tables.
  await truncate();
  await handler(events[0]!, { awsRequestId: 'warm-up' });
  await startTracing({ exporter: 'otlp', protocol: 'http/protobuf' }, { serviceName: 'bench' });
  await handler(events[1] ?? events[0]!, { awsRequestId: 'warm-up-traced' });
  await stopTracing();
  await avroHandler(avroEvents[0]!, { awsRequestId: 'warm-up-avro' });
  await truncate();
  const seconds: Record<string, number[]> = { handler: [], traced: [], avro: [], insert: [], copy: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, run] of Object.entries(phases)) {
      await truncate();
      seconds[name]!.push(await timed(run));
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_inbox`;
      const n = row?.n;
      if (n !== RECORDS) throw new Error(`${name} stored ${n} rows, expected ${RECORDS}`);
    }
  }

  const rate = (name: string) => RECORDS / median(seconds[name]!);
  const copyRate = rate('copy');
  console.log(
    `\ningest benchmark: ${RECORDS} records, 1 KiB payloads, ${BATCH}-record batches over ${PARTITIONS} partitions, median of ${ROUNDS}`,
  );
  for (const name of ['handler', 'traced', 'avro', 'insert', 'copy']) {
    console.log(
      `  ${name.padEnd(8)} ${Math.round(rate(name)).toString().padStart(8)} records/s   ${(rate(name) / copyRate).toFixed(2)} × COPY`,
    );
  }
  console.log(`\n  handler / COPY = ${(rate('handler') / copyRate).toFixed(2)}  (aim ≥ 0.5)`);
  console.log(
    `  traced / handler = ${(rate('traced') / rate('handler')).toFixed(2)}  (tracing on beside off; ${receiver.received.length} OTLP exports received)`,
  );
  console.log(
    `  avro / handler = ${(rate('avro') / rate('handler')).toFixed(2)}  (Avro values beside JSON ones; registry lookups: ${registry.requests()})`,
  );
  console.log('  handler: decode + validate + one INSERT … ON CONFLICT per batch (no poison: no BEGIN/COMMIT), via createIngestHandler');
  console.log(
    '  avro:    the same events as Avro in the Confluent wire format: framing, writer schema (cached), avsc, typed JSON, then as handler',
  );
  console.log('  insert:  the same INSERT of pre-decoded rows (what decoding costs = insert − handler)');
  console.log('  copy:    one COPY of all rows, pre-built text, into the same table and indexes');
} finally {
  await sql.end({ timeout: 5 });
  await registry.close();
  await receiver.close();
  await server.stop();
}
