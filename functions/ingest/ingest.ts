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
 * When the single transaction fails for a reason that is neither infrastructure nor a
 * property of one record, retrying the same way would fail the same way and block every
 * partition. So the store steps down a ladder, each rung its own transaction:
 *
 *   direct      one INSERT for the inbox rows, one for the poison rows (pipelined);
 *               inline consumers also process their new rows here. A batch with no
 *               poison of a deferred consumer is that one INSERT alone, without BEGIN/COMMIT.
 *   bisect      only after a data error (SQLSTATE class 22/23/54): the same, each insert
 *               in savepoints that split the rows until the ones PostgreSQL refuses are
 *               found; those become poison UNSTORABLE_VALUE, the rest are stored.
 *   deferred    inline consumers only: store without processing (RECEIVED, for the worker).
 *   poison-all  every record to poison as INGEST_FAILED, raw value kept, so that a bug or
 *               a schema drift never crash-loops a partition; operators re-ingest after
 *               the fix (the poison_alarm fires on the first one).
 *
 * An infrastructure error on any rung stops the ladder and reports the batch. If even
 * poison-all fails, the batch is reported too: nothing is lost, the ESM's bounded retries
 * and on-failure destination take over.
 *
 * A paused consumer (ops pause: its processing, migration 0100) is still ingested: its
 * records become inbox rows and its partitions move on, but nothing is processed. An
 * inline consumer's ingest stores its rows without processing them (as the deferred rung
 * does), and no worker is woken; the rows wait RECEIVED, in order, for the resume.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { dispatch } from '../framework/dispatch';
import { outcomeForFailure } from '../framework/outcome';
import type { ConsumerDeclaration } from '../framework/types';
import { completeRows } from '../inbox/complete';
import { workerPause } from '../inbox/consumer-pause';
import { deferBehindAggregate } from '../inbox/defer-behind-aggregate';
import { insertInboxBatchCount, insertInboxBatchLeased, type InboxInsert } from '../inbox/insert-batch';
import { recordPoison, type PoisonInsert } from '../inbox/record-poison';
import type { InboxRow, Outcome } from '../inbox/types';
import { reserveWakeUp } from '../inbox/wake-up-gate';
import type { Config } from '../lib/config';
import type { Sql, TransactionSql } from '../lib/db';
import { classifyError, isConnectionError, isInfrastructureError, sqlStateOf } from '../lib/errors';
import { MetricNames } from '../lib/metric-names';
import { count } from '../lib/observability';
import { INVITATION_GRACE_SECONDS, sendWakeUp, type WorkerTarget } from '../lib/wake-up';
import { decodeRecord, PoisonCodes, resolveValueSchemas, undecodedPoison, type ValueSchemas } from './decode';
import type { SchemaSource } from './schema-source';
import type { BatchItemFailure, KafkaBatchResponse, KafkaEvent, KafkaRecord } from './types';
import { compileSchema } from './writer-schema';

/**
 * How long an inline row's lease lasts. Nobody else ever sees the lease: the rows are
 * inserted PROCESSING and completed in the same transaction. The schema requires one, and
 * if a future change ever committed a PROCESSING row, the reaper would free it this soon.
 */
export const INLINE_LEASE_SECONDS = 60;

export interface IngestDependencies {
  sql: Sql;
  consumer: ConsumerDeclaration;
  config: Pick<Config, 'maxPayloadBytes'> & Partial<Pick<Config, 'maxJsonDepth'>>;
  logger: Logger;
  metrics: Metrics;
  /**
   * The consumer's worker, woken when a batch leaves it rows and no worker is awake
   * (docs/worker.md, "Wake-ups"). Absent: the schedule alone runs the worker.
   */
  wakeUp?: WorkerTarget;
  /**
   * Where the writer schemas of registry-framed values come from (the consumer's schema
   * registry, docs/ingest.md "Binary values"). Absent: a value naming a registry schema is
   * poison SCHEMA_NOT_FOUND, unless the consumer pins its schema.
   */
  schemaSource?: SchemaSource;
}

export type StoreStrategy = 'direct' | 'bisect' | 'deferred' | 'poison-all';

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

type WakeUpResult = 'sent' | 'gate-closed' | 'paused' | 'failed';

interface Stored {
  inserted: number;
  poisoned: number;
  poisonRecords: number;
  outcomes: Outcome[];
}

/** SQLSTATE classes that mean "this data", not "this database": data exception, integrity, program limit. */
const DATA_ERROR_CLASSES = new Set(['22', '23', '54']);

/**
 * What a log line may say of an error: the message of a client-side error (a refused
 * connection, a timeout), never a PostgreSQL server's, which can quote the values of the
 * statement (a data error's "invalid input syntax for type json: …"). SQLSTATE and code say
 * what happened without them.
 */
export function serverSafe(c: { message: string; sqlState?: string | undefined }): { error?: string } {
  return c.sqlState === undefined ? { error: c.message } : {};
}

export function isDataError(error: unknown): boolean {
  const state = sqlStateOf(error);
  return state !== undefined && DATA_ERROR_CLASSES.has(state.slice(0, 2));
}

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

/** Keep one row per event id: the lowest offset (the first delivery of it). */
function dedupe(rows: InboxInsert[]): InboxInsert[] {
  const byId = new Map<string, InboxInsert>();
  for (const row of rows) {
    const seen = byId.get(row.eventId);
    if (seen === undefined || row.offset < seen.offset) byId.set(row.eventId, row);
  }
  return [...byId.values()];
}

/**
 * Sorted as the INSERT orders them (collate "C" ≈ code-unit order), so that bisect probes
 * take their locks in the same order as a direct insert. The direct insert sorts in SQL.
 */
function byEventId(rows: readonly InboxInsert[]): InboxInsert[] {
  return [...rows].sort((a, b) => (a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0));
}

function asPoison(row: InboxInsert, errorCode: string, errorMessage: string): PoisonInsert {
  return {
    topic: row.topic,
    partition: row.partition,
    offset: row.offset,
    recordKey: row.recordKey,
    recordKeyEncoding: row.recordKeyEncoding,
    // Valid JSON text never holds a raw NUL, so the text itself is storable.
    rawValue: row.envelopeJson,
    rawEncoding: 'utf8',
    headers: row.headers,
    errorCode,
    errorMessage,
    recordTimestampMs: null,
  };
}

/** The last resort for a poison row PostgreSQL refuses: its coordinates and reason, without the value. */
function bare(row: PoisonInsert, error: unknown): PoisonInsert {
  return {
    ...row,
    recordKey: null,
    recordKeyEncoding: 'utf8',
    rawValue: null,
    rawEncoding: 'none',
    headers: {},
    errorMessage: `${row.errorMessage}; the raw value could not be stored (SQLSTATE ${sqlStateOf(error) ?? 'unknown'}), read it from the topic`,
  };
}

/**
 * Write `items` with `write`; when PostgreSQL refuses them for their data, split them in
 * halves (each attempt in a savepoint, so the transaction survives) until every refused
 * item is isolated and handed to `refused`. Costs O(k log n) statements for k bad rows.
 */
async function writeSplitting<T>(
  tx: TransactionSql,
  items: readonly T[],
  write: (q: TransactionSql, items: readonly T[]) => Promise<void>,
  refused: (item: T, error: unknown) => void,
): Promise<void> {
  if (items.length === 0) return;
  try {
    await tx.savepoint((sp) => write(sp, items));
  } catch (error) {
    if (!isDataError(error)) throw error;
    if (items.length === 1) {
      refused(items[0]!, error);
      return;
    }
    const mid = Math.ceil(items.length / 2);
    await writeSplitting(tx, items.slice(0, mid), write, refused);
    await writeSplitting(tx, items.slice(mid), write, refused);
  }
}

export function createIngest(deps: IngestDependencies) {
  const { sql, consumer, config, logger, metrics } = deps;
  const limits = {
    maxPayloadBytes: config.maxPayloadBytes,
    ...(config.maxJsonDepth !== undefined ? { maxJsonDepth: config.maxJsonDepth } : {}),
  };
  // Compiled once: a pinned schema that does not compile fails the function at its start, not per record.
  const pinned: ValueSchemas['pinned'] =
    consumer.valueSchema === undefined
      ? undefined
      : { schema: compileSchema(consumer.valueSchema), framing: consumer.valueSchema.framing ?? 'none' };

  /**
   * After the batch is stored, never before: the woken worker must find its rows. Nothing
   * here can fail the batch or change its response; it costs one statement (which only
   * reads while a worker is awake) and, when the gate opens, one asynchronous Invoke.
   */
  async function wakeWorker(target: WorkerTarget, requestId: string): Promise<WakeUpResult> {
    const invitation = `wake-up:${requestId}`;
    let slot: Awaited<ReturnType<typeof reserveWakeUp>>;
    try {
      slot = await reserveWakeUp(sql, consumer.name, invitation, INVITATION_GRACE_SECONDS);
    } catch (error) {
      const c = classifyError(error);
      count(metrics, MetricNames.WakeUpFailures, 1);
      logger.warn('wake_up_failed', {
        consumerName: consumer.name,
        source: 'wake-up',
        stage: 'gate',
        errorCode: c.code,
        sqlState: c.sqlState,
      });
      return 'failed';
    }
    if (slot === 'closed') return 'gate-closed';
    if (slot === 'paused') return 'paused';
    const sent = await sendWakeUp(
      target,
      { source: 'wake-up', consumerName: consumer.name, slot: slot.slotNo, invitation },
      { logger, metrics },
    );
    return sent ? 'sent' : 'failed';
  }

  /**
   * Process the new rows in the ingest transaction: each in a savepoint, all outcomes in one
   * statement. A row that is not alone at the head of its aggregate is left RECEIVED for the
   * worker, which serializes an aggregate's rows (docs/design.md §3, guarantee 4).
   */
  async function processInline(tx: TransactionSql, rows: InboxRow[], owner: string): Promise<Outcome[]> {
    const deferred = new Set(
      await deferBehindAggregate(
        tx,
        owner,
        rows.map((r) => r.inbox_id),
      ),
    );
    const outcomes: Outcome[] = [];
    for (const row of rows) {
      if (deferred.has(row.inbox_id)) continue;
      try {
        const status = await tx.savepoint((sp) => dispatch(consumer, sp, row));
        outcomes.push({ inboxId: row.inbox_id, status });
      } catch (error) {
        // A broken connection is the batch's problem; anything else is this row's.
        if (isConnectionError(error)) throw error;
        const outcome = outcomeForFailure(consumer.retry, { inboxId: row.inbox_id, attempt: 1, waitedSeconds: 0 }, error);
        outcomes.push(outcome);
        logger.warn('inline processing failed', {
          eventId: row.event_id,
          eventType: row.event_type,
          topic: row.topic_name,
          partition: row.partition_no,
          offset: row.offset_no,
          correlationId: row.correlation_id,
          attempt: 1,
          status: outcome.status,
          errorCode: 'errorCode' in outcome ? outcome.errorCode : undefined,
        });
      }
    }
    await completeRows(tx, owner, outcomes);
    return outcomes;
  }

  async function write(
    valid: InboxInsert[],
    poison: PoisonInsert[],
    options: { splitting: boolean; inline: boolean; owner: string },
  ): Promise<Stored> {
    if (!options.splitting && !options.inline && poison.length === 0) {
      // The common batch: nothing else has to commit with the inbox rows, and one INSERT
      // is atomic by itself. One round trip instead of BEGIN, INSERT, COMMIT.
      const inserted = await insertInboxBatchCount(sql, consumer.name, valid);
      return { inserted, poisoned: 0, poisonRecords: 0, outcomes: [] };
    }
    return sql.begin(async (tx) => {
      const leased: InboxRow[] = [];
      let inserted = 0;
      let poisoned = 0;
      const insert = async (q: TransactionSql, rows: readonly InboxInsert[]) => {
        if (options.inline) {
          const got = await insertInboxBatchLeased(q, consumer.name, rows, { owner: options.owner, leaseSeconds: INLINE_LEASE_SECONDS });
          leased.push(...got);
          inserted += got.length;
        } else {
          inserted += await insertInboxBatchCount(q, consumer.name, rows);
        }
      };
      const allPoison = [...poison];
      if (!options.splitting) {
        // Pipelined: both statements leave in one write, one wait for both answers.
        const [, p] = await Promise.all([insert(tx, valid), recordPoison(tx, consumer.name, poison)]);
        poisoned = p;
      } else {
        const unstorable: PoisonInsert[] = [];
        await writeSplitting(tx, valid, insert, (row, error) =>
          unstorable.push(
            asPoison(row, PoisonCodes.UNSTORABLE_VALUE, `PostgreSQL refused the row (SQLSTATE ${sqlStateOf(error) ?? 'unknown'})`),
          ),
        );
        allPoison.push(...unstorable);
        const bareRows: PoisonInsert[] = [];
        await writeSplitting(
          tx,
          allPoison,
          async (q, rows) => {
            poisoned += await recordPoison(q, consumer.name, rows);
          },
          (row, error) => bareRows.push(bare(row, error)),
        );
        poisoned += await recordPoison(tx, consumer.name, bareRows);
      }
      const outcomes = options.inline ? await processInline(tx, leased, options.owner) : [];
      return { inserted, poisoned, poisonRecords: allPoison.length, outcomes };
    });
  }

  /** The ladder described at the top of this file. Throws only what must be reported back. */
  async function store(
    valid: InboxInsert[],
    poison: PoisonInsert[],
    owner: string,
    inline: boolean,
  ): Promise<Stored & { strategy: StoreStrategy }> {
    let sorted: InboxInsert[] | undefined;
    const ordered = () => (sorted ??= byEventId(valid));
    const rungs: Array<{ strategy: StoreStrategy; run: () => Promise<Stored>; after: (e: unknown) => boolean }> = [
      { strategy: 'direct', run: () => write(valid, poison, { splitting: false, inline, owner }), after: () => true },
      { strategy: 'bisect', run: () => write(ordered(), poison, { splitting: true, inline, owner }), after: isDataError },
      ...(inline
        ? [
            {
              strategy: 'deferred' as const,
              run: () => write(ordered(), poison, { splitting: true, inline: false, owner }),
              after: () => true,
            },
          ]
        : []),
      {
        strategy: 'poison-all',
        run: () =>
          write(
            [],
            [...poison, ...valid.map((r) => asPoison(r, PoisonCodes.INGEST_FAILED, 'the inbox refused the batch; see the ingest log'))],
            { splitting: true, inline: false, owner },
          ),
        after: () => true,
      },
    ];
    let lastError: unknown;
    for (const rung of rungs) {
      if (lastError !== undefined && !rung.after(lastError)) continue;
      try {
        return { ...(await rung.run()), strategy: rung.strategy };
      } catch (error) {
        if (isInfrastructureError(error)) throw error;
        const c = classifyError(error);
        logger.error('ingest store failed, stepping down', {
          strategy: rung.strategy,
          errorCode: c.code,
          sqlState: c.sqlState,
          ...serverSafe(c),
        });
        lastError = error;
      }
    }
    throw lastError;
  }

  return async function ingest(event: KafkaEvent, context: Pick<Context, 'awsRequestId'>): Promise<IngestReport> {
    const started = performance.now();
    const partitions = Object.entries(event.records ?? {}).filter(([, rs]) => rs.length > 0);
    const records: KafkaRecord[] = partitions.flatMap(([, rs]) => rs);

    const schemas = await resolveValueSchemas(records, {
      ...(pinned ? { pinned } : {}),
      ...(deps.schemaSource ? { source: deps.schemaSource } : {}),
    });
    const valid: InboxInsert[] = [];
    const poison: PoisonInsert[] = [];
    // A partition whose record cannot be read now (registry unavailable) is handed back from
    // that record on: the mapping redelivers it and everything after it, in order.
    const handedBack: BatchItemFailure[] = [];
    let registryUnavailable = 0;
    let unavailableReason: string | undefined;
    for (const [partition, rs] of partitions) {
      const stored: Array<{ valid: InboxInsert } | { poison: PoisonInsert }> = [];
      for (const record of rs) {
        try {
          const d = decodeRecord(record, consumer, limits, schemas);
          if (d.kind === 'unavailable') {
            const from = Math.min(...rs.filter((r) => r.offset >= record.offset).map((r) => r.offset));
            handedBack.push({ itemIdentifier: { partition, offset: from } });
            registryUnavailable += rs.filter((r) => r.offset >= from).length;
            unavailableReason ??= d.reason;
            break;
          }
          stored.push(d.kind === 'valid' ? { valid: d.row } : { poison: d.row });
        } catch (error) {
          // A defect in decoding must not block the partition: keep the record as delivered.
          // Not the error's message: a library's may quote the value.
          logger.error('record decoding threw', {
            topic: record.topic,
            partition: record.partition,
            offset: record.offset,
            error: (error as Error)?.name ?? 'unknown',
          });
          stored.push({
            poison: undecodedPoison(record, PoisonCodes.INGEST_FAILED, 'decoding the record failed unexpectedly; see the ingest log'),
          });
        }
      }
      const held = handedBack.find((h) => h.itemIdentifier.partition === partition)?.itemIdentifier.offset;
      for (const item of stored) {
        const row = 'valid' in item ? item.valid : item.poison;
        if (held !== undefined && row.offset >= held) continue;
        if ('valid' in item) valid.push(item.valid);
        else poison.push(item.poison);
      }
    }
    const unique = dedupe(valid);
    const decodedAt = performance.now();

    const report: IngestReport = {
      response: { batchItemFailures: [] },
      received: records.length,
      inserted: 0,
      duplicates: 0,
      poisonRecords: 0,
      poisoned: 0,
      processed: 0,
      ignored: 0,
      retried: 0,
      quarantined: 0,
      strategy: null,
      wakeUp: null,
      pausedInline: false,
      registryUnavailable,
    };
    report.response.batchItemFailures = handedBack;
    let failure: ReturnType<typeof classifyError> | undefined;
    if (valid.length + poison.length > 0) {
      try {
        // An inline consumer processes its rows here unless it is paused (one key lookup).
        report.pausedInline = consumer.mode === 'inline' && unique.length > 0 && (await workerPause(sql, consumer.name)) !== null;
        const inline = consumer.mode === 'inline' && !report.pausedInline;
        const stored = await store(unique, poison, `ingest:${context.awsRequestId}`, inline);
        report.strategy = stored.strategy;
        report.inserted = stored.inserted;
        report.poisoned = stored.poisoned;
        report.poisonRecords = stored.poisonRecords;
        report.duplicates = stored.strategy === 'poison-all' ? 0 : valid.length - stored.inserted - (stored.poisonRecords - poison.length);
        for (const o of stored.outcomes) {
          if (o.status === 'PROCESSED') report.processed++;
          else if (o.status === 'IGNORED') report.ignored++;
          else if (o.status === 'RETRY_PENDING') report.retried++;
          else report.quarantined++;
        }
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
      report.wakeUp = await wakeWorker(deps.wakeUp, context.awsRequestId);
    }

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
    }

    const finished = performance.now();
    const line = {
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
      ...(registryUnavailable > 0 ? { registryUnavailable, registryError: unavailableReason } : {}),
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
    return report;
  };
}

export type Ingest = ReturnType<typeof createIngest>;

/** The Lambda-shaped handler: what handler.ts exports, and what the simulator calls. */
export function createIngestHandler(deps: IngestDependencies) {
  const ingest = createIngest(deps);
  return async (event: KafkaEvent, context: Pick<Context, 'awsRequestId'>): Promise<KafkaBatchResponse> =>
    (await ingest(event, context)).response;
}
