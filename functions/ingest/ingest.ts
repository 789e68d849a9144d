/**
 * The ingest function's logic: one MSK batch → inbox rows + poison rows, in ONE
 * transaction, or a partial batch response naming what to redeliver.
 *
 * Every record ends in exactly one of three places (docs/design.md §3, guarantee 1):
 *   - an inbox row (new, or a duplicate of one stored earlier: ON CONFLICT DO NOTHING);
 *   - a poison row with a reason (it can never become an inbox row; its partition moves on);
 *   - the batch item failures: the database could not be reached or timed out, nothing of
 *     the batch was stored (one transaction), and every partition is reported at its first
 *     offset so the ESM redelivers it. Redelivery is harmless: the inbox dedupes.
 *
 * How a batch is stored, and the ladder it steps down when the one transaction fails, is
 * store-batch.ts. This module wires the steps of one invocation: classify the records
 * (classify-records.ts), store them (store-batch.ts), wake the worker (the wake-ups wing, through deps.wakeUp), and
 * report (batch-report.ts).
 *
 * A paused consumer (ops pause: its processing, migration 0100) is still ingested: its
 * records become inbox rows and its partitions move on, but nothing is processed. An
 * inline consumer's ingest stores its rows without processing them (as the deferred rung
 * does), and no worker is woken; the rows wait RECEIVED, in order, for the resume.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { SpanKind, SpanStatusCode, type Link, type Span } from '@opentelemetry/api';
import type { Context } from 'aws-lambda';
import type { ConsumerDeclaration } from '../framework/types';
import { workerPause } from '../inbox/consumer-pause';
import type { Config } from '../lib/config';
import { retryOnDeadConnection, type Sql } from '../lib/db';
import { classifyError, type Classification } from '../lib/errors';
import { connectionRetried } from '../lib/observability';
import { logKeysOf, spanContextOf, tracer } from '../lib/tracing';
import type { InboxInsert } from '../inbox/insert-batch';
import { countOutcomes, emptyReport, logBatch, publishCounts, type IngestReport, type WakeUpResult } from './batch-report';
import { classifyRecords, type Classified } from './classify-records';
import { decodeRecord } from './decode';
import { JSON_VALUES, type DecodeLimits, type ValueDecoder } from './decode-value';
import { storeBatch, type StoreContext } from './store-batch';
import type { BatchItemFailure, KafkaBatchResponse, KafkaEvent, KafkaRecord } from './types';

export interface IngestDependencies {
  sql: Sql;
  consumer: ConsumerDeclaration;
  config: Pick<Config, 'maxPayloadBytes'> & Partial<Pick<Config, 'maxJsonDepth'>>;
  logger: Logger;
  metrics: Metrics;
  /**
   * Wakes the consumer's worker when a batch leaves it rows and no worker is awake: the
   * wake-ups wing's `wakeUpsTo` (functions/wings/wake-ups, docs/worker.md "Wake-ups"),
   * plugged in by the handler. Absent: the schedule alone runs the worker.
   */
  wakeUp?: WorkerWakeUp;
  /**
   * Reads the values that are not plain JSON text (registry-framed, the mapping's SOURCE
   * format, the consumer's pinned schema): the decoding wing's `binaryValues`
   * (docs/ingest.md "Binary values"), plugged in by the handler. Absent: every value is read
   * as JSON text, and a consumer that declares a schema registry or a pinned schema is refused.
   */
  valueDecoder?: ValueDecoder;
}

/** What a wake-up after the batch works with: the ingest's own client, logger and metrics. */
export interface WakeUpScope {
  sql: Sql;
  consumerName: string;
  logger: Logger;
  metrics: Metrics;
}

/**
 * The seam of the wake-ups wing: called after the batch is stored, never before, with the
 * invocation's request id. It never throws: a wake-up that fails is logged, counted and
 * reported as 'failed'; the batch's response is unaffected.
 */
export type WorkerWakeUp = (scope: WakeUpScope, requestId: string) => Promise<WakeUpResult>;

/** Every partition of the batch at its lowest offset. */
export function failEveryPartition(event: KafkaEvent): BatchItemFailure[] {
  const failures: BatchItemFailure[] = [];
  for (const [partition, records] of Object.entries(event.records ?? {})) {
    if (records.length === 0) continue;
    // The ESM's own key, as given: an identifier not in the batch makes it retry everything.
    failures.push({ itemIdentifier: { partition, offset: Math.min(...records.map((r) => r.offset)) } });
  }
  return failures;
}

/** What the invocation works with, fixed when the function starts. */
interface IngestSetup {
  deps: IngestDependencies;
  limits: DecodeLimits;
  values: ValueDecoder;
  store: StoreContext;
}

export function createIngest(deps: IngestDependencies) {
  const { sql, consumer, config, logger } = deps;
  if (deps.valueDecoder === undefined && (consumer.valueSchema !== undefined || consumer.schemaRegistry !== undefined)) {
    // Its values may be binary: read as JSON text they would all be poison.
    throw new Error(`consumer ${consumer.name} declares a schema registry or a pinned schema, and its ingest has no value decoder`);
  }
  const setup: IngestSetup = {
    deps,
    limits: {
      maxPayloadBytes: config.maxPayloadBytes,
      ...(config.maxJsonDepth !== undefined ? { maxJsonDepth: config.maxJsonDepth } : {}),
    },
    values: deps.valueDecoder ?? JSON_VALUES,
    store: { sql, consumer, logger },
  };
  return (event: KafkaEvent, context: Pick<Context, 'awsRequestId'>): Promise<IngestReport> => ingestBatch(setup, event, context);
}

/**
 * One invocation in its span: OpenTelemetry's messaging conventions for a Kafka batch
 * (CONSUMER, `process <topic>`), with a link to each record's producer context: the
 * records of one batch belong to many traces (docs/tracing.md).
 */
function batchSpan(consumer: ConsumerDeclaration, event: KafkaEvent, records: readonly KafkaRecord[]): Span {
  const topics = [...new Set(records.map((r) => r.topic))];
  return tracer().startSpan(`process ${topics.join(',')}`, {
    kind: SpanKind.CONSUMER,
    attributes: {
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.destination.name': topics.join(','),
      'messaging.consumer.group.name': consumer.name,
      'messaging.batch.message_count': records.length,
      ...(event.eventSourceArn === undefined ? {} : { 'cloud.resource_id': event.eventSourceArn }),
      'inbox.consumer': consumer.name,
    },
  });
}

/** The links of a batch's span: each stored record that came with a producer's context. */
function recordLinks(rows: readonly InboxInsert[]): Link[] {
  return rows.flatMap((row) => {
    const context = spanContextOf(row.traceContext);
    if (context === undefined) return [];
    return [
      {
        context,
        attributes: {
          'messaging.destination.partition.id': String(row.partition),
          'messaging.kafka.offset': row.offset,
          'messaging.message.id': row.eventId,
        },
      },
    ];
  });
}

/** One invocation: classify the records, store them, wake the worker, count and log. */
async function ingestBatch(setup: IngestSetup, event: KafkaEvent, context: Pick<Context, 'awsRequestId'>): Promise<IngestReport> {
  const { deps } = setup;
  const started = performance.now();
  const partitions = Object.entries(event.records ?? {}).filter(([, rs]) => rs.length > 0);
  const records: KafkaRecord[] = partitions.flatMap(([, rs]) => rs);
  const span = batchSpan(deps.consumer, event, records);
  try {
    const report = await ingestRecords(setup, event, context, { partitions, records, started, span });
    span.setAttributes({
      'inbox.inserted': report.inserted,
      'inbox.duplicates': report.duplicates,
      'inbox.poisoned': report.poisoned,
      'inbox.handed_back': report.response.batchItemFailures.length,
    });
    if (report.response.batchItemFailures.length > 0) span.setStatus({ code: SpanStatusCode.ERROR, message: 'batch item failures' });
    return report;
  } finally {
    span.end();
  }
}

async function ingestRecords(
  setup: IngestSetup,
  event: KafkaEvent,
  context: Pick<Context, 'awsRequestId'>,
  batch: { partitions: [string, KafkaRecord[]][]; records: KafkaRecord[]; started: number; span: Span },
): Promise<IngestReport> {
  const { deps } = setup;
  const { partitions, records, started, span } = batch;
  const classified = await classify(setup, partitions, records);
  span.addLinks(recordLinks(classified.unique));
  const decodedAt = performance.now();

  const report = emptyReport(records.length, classified.registryUnavailable);
  report.response.batchItemFailures = classified.handedBack;
  let failure: Classification | undefined;
  if (classified.valid.length + classified.poison.length > 0) {
    try {
      // A connection that died while the container was frozen: once more on a new one, as
      // long as nothing of the batch reached the database.
      await retryOnDeadConnection(
        deps.sql,
        () => storeClassified(setup, classified, report, context.awsRequestId, span),
        connectionRetried(deps.logger),
      );
    } catch (error) {
      failure = classifyError(error);
      report.response.batchItemFailures = failEveryPartition(event);
    }
  }
  // New rows the worker must process: all of a deferred consumer's; an inline consumer's
  // that the ingest transaction did not finish: left RECEIVED (behind their aggregate, or
  // by its deferred rung) or RETRY_PENDING (a woken worker stays awake past the backoff
  // of a first retry and takes it when due, instead of the next tick).
  const forWorker = report.inserted - (report.processed + report.ignored + report.quarantined);
  if (deps.wakeUp !== undefined && failure === undefined && forWorker > 0) {
    report.wakeUp = await deps.wakeUp(
      { sql: deps.sql, consumerName: deps.consumer.name, logger: deps.logger, metrics: deps.metrics },
      context.awsRequestId,
    );
  }

  publishCounts(deps.metrics, deps.consumer, report);
  logBatch(deps.logger, deps.consumer, report, {
    traceKeys: logKeysOf(span),
    partitions,
    poison: classified.poison,
    unavailableReason: classified.unavailableReason,
    failure,
    started,
    decodedAt,
    finished: performance.now(),
  });
  return report;
}

/** The batch's value reader (its writer schemas resolved), then every record decoded and sorted (classify-records.ts). */
async function classify(
  setup: IngestSetup,
  partitions: ReadonlyArray<readonly [string, readonly KafkaRecord[]]>,
  records: KafkaRecord[],
): Promise<Classified> {
  const { deps, limits } = setup;
  const read = await setup.values.forBatch(records);
  return classifyRecords(partitions, (record) => decodeRecord(record, deps.consumer, limits, read), deps.logger);
}

/** The classified rows stored (store-batch.ts), and what the store did written into `report`. Throws what must be reported back. */
async function storeClassified(
  setup: IngestSetup,
  classified: Classified,
  report: IngestReport,
  requestId: string,
  span: Span,
): Promise<void> {
  const { sql, consumer } = setup.deps;
  const { valid, unique, poison } = classified;
  // An inline consumer processes its rows here unless it is paused (one key lookup).
  report.pausedInline = consumer.mode === 'inline' && unique.length > 0 && (await workerPause(sql, consumer.name)) !== null;
  const inline = consumer.mode === 'inline' && !report.pausedInline;
  const stored = await storeBatch(setup.store, unique, poison, `ingest:${requestId}`, inline, span);
  report.strategy = stored.strategy;
  report.inserted = stored.inserted;
  report.poisoned = stored.poisoned;
  report.poisonRecords = stored.poisonRecords;
  report.duplicates = stored.strategy === 'poison-all' ? 0 : valid.length - stored.inserted - (stored.poisonRecords - poison.length);
  countOutcomes(report, stored.outcomes);
}

export type Ingest = ReturnType<typeof createIngest>;

/** The Lambda-shaped handler: what handler.ts exports, and what the simulator calls. */
export function createIngestHandler(deps: IngestDependencies) {
  const ingest = createIngest(deps);
  return async (event: KafkaEvent, context: Pick<Context, 'awsRequestId'>): Promise<KafkaBatchResponse> =>
    (await ingest(event, context)).response;
}
