/**
 * What one ingest invocation did: the report the handler and tests read, its metrics, and
 * its one log line.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { ConsumerDeclaration } from '../framework/types';
import type { PoisonInsert } from '../inbox/record-poison';
import type { Outcome } from '../inbox/types';
import type { Classification } from '../lib/errors';
import { ErrorCodes, serverSafe } from '../lib/errors';
import { MetricNames } from '../lib/metric-names';
import { count } from '../lib/observability';
import type { StoreStrategy } from './store-batch';
import type { KafkaBatchResponse, KafkaRecord } from './types';

/**
 * What waking the worker after a batch did (the wake-ups wing, functions/wings/wake-ups): sent
 * a wake-up, found one awake or on its way (the gate was closed), found the consumer paused,
 * or failed.
 */
export type WakeUpResult = 'sent' | 'gate-closed' | 'paused' | 'failed';

/** What one invocation did; the handler returns `response`, tests and the simulator read the rest. */
export interface IngestReport {
  response: KafkaBatchResponse;
  received: number;
  /** New inbox rows. */
  inserted: number;
  /** Valid records whose (consumer, event id) was already stored, or repeated in the batch. */
  duplicates: number;
  /** Records that went to poison in this delivery (new rows or recorded by an earlier one). */
  poisonRecords: number;
  /** Poison rows this delivery added. */
  poisoned: number;
  /** Inline mode: outcomes of the new rows processed in the ingest transaction. */
  processed: number;
  ignored: number;
  retried: number;
  quarantined: number;
  /** Of those quarantined, for a missing grant (DB_PERMISSION). */
  permissionDenied: number;
  /** How the batch was stored; absent when it was reported back. */
  strategy: StoreStrategy | null;
  /**
   * The worker after the batch: sent a wake-up, found one awake or on its way (the gate was
   * closed), found the consumer paused (nobody is woken), failed to wake it (logged and
   * counted; the batch is unaffected); null when nothing was left for the worker or no
   * wake-up is configured.
   */
  wakeUp: WakeUpResult | null;
  /** Inline consumers: the consumer was paused, so its new rows were stored without being processed. */
  pausedInline: boolean;
  /**
   * Records handed back because the schema registry could not be asked for their writer
   * schema: each one's partition is reported from its offset (later records of it too).
   */
  registryUnavailable: number;
}

export function emptyReport(received: number, registryUnavailable: number): IngestReport {
  return {
    response: { batchItemFailures: [] },
    received,
    inserted: 0,
    duplicates: 0,
    poisonRecords: 0,
    poisoned: 0,
    processed: 0,
    ignored: 0,
    retried: 0,
    quarantined: 0,
    permissionDenied: 0,
    strategy: null,
    wakeUp: null,
    pausedInline: false,
    registryUnavailable,
  };
}

/** The inline outcomes, counted into the report by status. */
export function countOutcomes(report: IngestReport, outcomes: readonly Outcome[]): void {
  for (const o of outcomes) {
    if (o.status === 'PROCESSED') report.processed++;
    else if (o.status === 'IGNORED') report.ignored++;
    else if (o.status === 'RETRY_PENDING') report.retried++;
    else if (o.status === 'QUARANTINED') {
      report.quarantined++;
      if (o.errorCode === ErrorCodes.DB_PERMISSION) report.permissionDenied++;
    }
  }
}

export function publishCounts(metrics: Metrics, consumer: ConsumerDeclaration, report: IngestReport): void {
  count(metrics, MetricNames.RecordsReceived, report.received);
  count(metrics, MetricNames.RecordsInserted, report.inserted);
  count(metrics, MetricNames.RecordsDuplicate, report.duplicates);
  count(metrics, MetricNames.RecordsPoisoned, report.poisoned);
  count(metrics, MetricNames.BatchItemFailures, report.response.batchItemFailures.length);
  count(metrics, MetricNames.SchemaRegistryUnavailable, report.registryUnavailable);
  if (consumer.mode === 'inline') {
    count(metrics, MetricNames.EventsProcessed, report.processed);
    count(metrics, MetricNames.EventsIgnored, report.ignored);
    count(metrics, MetricNames.EventsRetried, report.retried);
    count(metrics, MetricNames.EventsQuarantined, report.quarantined);
    count(metrics, MetricNames.PermissionDenied, report.permissionDenied);
  }
}

/** What the batch's log line says besides the report: its partitions, poison, failure and timings. */
export interface BatchLogFacts {
  partitions: ReadonlyArray<readonly [string, readonly KafkaRecord[]]>;
  poison: readonly PoisonInsert[];
  unavailableReason: string | undefined;
  failure: Classification | undefined;
  /** performance.now() at the start, once decoded, and at the end. */
  started: number;
  decodedAt: number;
  finished: number;
  /** The batch span's trace and span ids (lib/tracing.ts logKeysOf). */
  traceKeys: { trace_id?: string; span_id?: string };
}

/** The batch's one log line: an error when it was reported back, else info. */
export function logBatch(logger: Logger, consumer: ConsumerDeclaration, report: IngestReport, facts: BatchLogFacts): void {
  const { partitions, poison, failure, started, decodedAt, finished } = facts;
  const registryUnavailable = report.registryUnavailable;
  const line = {
    ...facts.traceKeys,
    received: report.received,
    inserted: report.inserted,
    duplicates: report.duplicates,
    poisonRecords: report.poisonRecords,
    poisoned: report.poisoned,
    ...(consumer.mode === 'inline'
      ? { processed: report.processed, ignored: report.ignored, retried: report.retried, quarantined: report.quarantined }
      : {}),
    strategy: report.strategy,
    ...(report.wakeUp !== null ? { wakeUp: report.wakeUp } : {}),
    ...(report.pausedInline ? { pausedInline: true } : {}),
    ...(registryUnavailable > 0 ? { registryUnavailable, registryError: facts.unavailableReason } : {}),
    partitions: partitions.map(([partition, rs]) => ({
      partition,
      count: rs.length,
      firstOffset: rs[0]!.offset,
      lastOffset: rs[rs.length - 1]!.offset,
    })),
    // Coordinates and reasons only, bounded: never a value.
    poison: poison.slice(0, 20).map((p) => ({ partition: p.partition, offset: p.offset, topic: p.topic, errorCode: p.errorCode })),
    batchItemFailures: report.response.batchItemFailures.length,
    decodeMs: Math.round(decodedAt - started),
    storeMs: Math.round(finished - decodedAt),
    durationMs: Math.round(finished - started),
  };
  if (failure !== undefined) {
    logger.error('ingest batch reported back', { ...line, errorCode: failure.code, sqlState: failure.sqlState, ...serverSafe(failure) });
  } else {
    logger.info('ingest batch', line);
  }
}
