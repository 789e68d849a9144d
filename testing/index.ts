/**
 * The test kit for a consumer's author: a consumer tested end to end on a real PostgreSQL,
 * through the real ingest and the real worker, each connected as the consumer's own database
 * role, so that a grant its declaration forgot fails the test rather than a deploy
 * (docs/testing-consumers.md).
 *
 * The tests run in the `db` vitest project, whose global setup (./global-setup.ts) starts
 * PostgreSQL once per run — embedded by default, the server at TEST_DATABASE_URL when set —
 * and migrates a template database; each test file gets its own clone.
 *
 * @example
 * ```ts
 * import { expect, it } from 'vitest';
 * import { orderFulfilment } from '../../../functions/consumers/order-fulfilment';
 * import { useTestInbox } from '../../../testing';
 *
 * const inbox = await useTestInbox();
 * const orders = inbox.consumer(orderFulfilment);
 *
 * it('requests one shipment per order placed', async () => {
 *   const report = await orders.deliver([{ eventId: 'e1', eventType: 'orders.order-placed.v1', … }]);
 *   expect(report).toMatchObject({ inserted: 1, poisoned: 0 });
 *   expect(await orders.work()).toMatchObject({ processed: 1 });
 *   expect(await orders.rows()).toMatchObject([{ eventId: 'e1', status: 'PROCESSED' }]);
 *   expect(await orders.query`select order_id from fulfilment.shipment_request`).toEqual([{ order_id: 'o1' }]);
 * });
 * ```
 */
import { randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { beforeEach } from 'vitest';
import { CONSUMERS } from '../functions/consumers/index';
import type { ConsumerDeclaration } from '../functions/framework/types';
import type { IngestReport } from '../functions/ingest/batch-report';
import { createIngest } from '../functions/ingest/ingest';
import type { Sql } from '../functions/lib/db';
import { ingestRoleOf, workerRoleOf } from '../functions/lib/database-roles';
import { newOwnerId, runWorker, type WorkerResult } from '../functions/worker/run-worker';
import { mskEvent, mskRecord, type KafkaRecord, type RecordValue } from '../tools/msk-events';
import { useTestDatabase, type TestDatabase } from './database';

export { mskEvent, mskRecord, type KafkaRecord, type RecordValue } from '../tools/msk-events';
export type { IngestReport } from '../functions/ingest/batch-report';
export type { WorkerResult } from '../functions/worker/run-worker';
export type { TestDatabase } from './database';

/** One inbox row of the consumer, as a test asserts on it. */
export interface InboxRowState {
  eventId: string;
  eventType: string;
  aggregateId: string;
  topic: string;
  partition: number;
  offset: number;
  status: 'RECEIVED' | 'PROCESSING' | 'RETRY_PENDING' | 'PROCESSED' | 'IGNORED' | 'QUARANTINED';
  attempts: number;
  errorCode: string | null;
  errorDetail: Record<string, unknown> | null;
}

/** A record the ingest could not make an inbox row of. */
export interface PoisonState {
  topic: string;
  partition: number;
  offset: number;
  errorCode: string;
}

export interface DeliverOptions {
  /** The topic the records come from (default: the declaration's first). */
  topic?: string;
  partition?: number;
  /** Each value's record key (default: the envelope's aggregate id, when it has one). */
  key?: (value: RecordValue, index: number) => string | null;
  headers?: Record<string, string>;
}

/** A consumer under test: its ingest, its worker and its tables, each as its own database role. */
export interface ConsumerUnderTest {
  readonly declaration: ConsumerDeclaration;
  /**
   * Deliver values (envelopes in the consumer's dialect, text, bytes, or null for a
   * tombstone) as one MSK batch to the consumer's ingest, at the partition's next offsets.
   * Delivering the same envelopes again is a redelivery (new offsets, same event ids).
   * An inline consumer processes them here; a deferred one leaves them for work().
   */
  deliver(values: readonly RecordValue[], options?: DeliverOptions): Promise<IngestReport>;
  /** Deliver MSK records as they are (tools/msk-events.ts builds them): offsets, keys, headers, raw values. */
  deliverRecords(records: readonly KafkaRecord[]): Promise<IngestReport>;
  /**
   * Run the consumer's worker until nothing is due now (a row retried later stays
   * RETRY_PENDING). Its log lines and metrics go nowhere unless given.
   */
  work(observability?: { logger?: Logger; metrics?: Metrics }): Promise<WorkerResult>;
  /** The consumer's inbox rows, in the order they were stored. */
  rows(): Promise<InboxRowState[]>;
  /** The consumer's poison records. */
  poison(): Promise<PoisonState[]>;
  /** Queries as the consumer's worker role: what its handlers may read, it may read. */
  query: Sql;
  /** The consumer's ingest role's client (what an inline consumer's handlers run as). */
  ingestSql: Sql;
}

export interface TestInbox {
  /** The test database: `sql` as its owner (arrange anything, truncate between tests), `as(role)`. */
  db: TestDatabase;
  /** The owner's client. */
  sql: Sql;
  /** The kit's handle on a consumer; a declaration not in CONSUMERS needs provision() first. */
  consumer(declaration: ConsumerDeclaration): ConsumerUnderTest;
  /**
   * Give consumers that are not in the declared list (a test's own fixture) their roles and
   * grants, as the migration step does for the declared ones. Their tables must exist.
   */
  provision(consumers: readonly ConsumerDeclaration[]): Promise<void>;
  /** Empty the inbox, its poison and every table the declared consumers use (what a test made). */
  reset(): Promise<void>;
}

function quiet(name: string): { logger: Logger; metrics: Metrics } {
  return {
    logger: new Logger({ serviceName: name, logLevel: 'SILENT' }),
    metrics: new Metrics({ namespace: 'ConsumerTest', serviceName: name }),
  };
}

/**
 * A test inbox for this test file: its own migrated database, the declared consumers'
 * roles ready. Call it once at a file's top level. With `{ reset: true }`, every test starts
 * from empty tables (reset() before each).
 */
export async function useTestInbox(options: { reset?: boolean } = {}): Promise<TestInbox> {
  const db = await useTestDatabase();
  const extra: ConsumerDeclaration[] = [];
  const offsets = new Map<string, number>();
  const known = () => [...CONSUMERS, ...extra];
  const inbox: TestInbox = {
    db,
    sql: db.sql,
    consumer: (declaration) => consumerUnderTest(db, declaration, offsets),
    async provision(consumers) {
      for (const c of consumers) {
        if (CONSUMERS.some((k) => k.name === c.name)) throw new Error(`${c.name} is a declared consumer: its roles are ready`);
        const at = extra.findIndex((k) => k.name === c.name);
        if (at === -1) extra.push(c);
        else extra[at] = c;
      }
      // Every consumer's: provisioning retires the roles of the consumers it is not given.
      await db.provision(known());
    },
    async reset() {
      const tables = [...new Set(known().flatMap((c) => Object.keys(c.tables ?? {})))];
      await db.sql.unsafe(
        `truncate integration.consumer_inbox, integration.consumer_raw_poison, integration.consumed_events, integration.outbox${tables
          .map((t) => `, ${t}`)
          .join('')}`,
      );
      offsets.clear();
    },
  };
  if (options.reset === true) beforeEach(() => inbox.reset());
  return inbox;
}

/** The aggregate id of an envelope in either dialect: the record's key, as producers set it. */
function aggregateKeyOf(value: RecordValue): string | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array) return null;
  const id = (value as Record<string, unknown>).aggregateId ?? (value as Record<string, unknown>).aggregate_id;
  return typeof id === 'string' ? id : null;
}

function consumerUnderTest(db: TestDatabase, declaration: ConsumerDeclaration, offsets: Map<string, number>): ConsumerUnderTest {
  const ingestSql = db.as(ingestRoleOf(declaration));
  const workerSql = db.as(workerRoleOf(declaration));
  const ingest = createIngest({ sql: ingestSql, consumer: declaration, config: { maxPayloadBytes: 256 * 1024 }, ...quiet('ingest') });
  const deliverRecords = (records: readonly KafkaRecord[]) => ingest(mskEvent([...records]), { awsRequestId: `test-${randomUUID()}` });
  return {
    declaration,
    ingestSql,
    query: workerSql,
    deliverRecords,
    deliver(values, options = {}) {
      const topic = options.topic ?? declaration.topics[0]!;
      const partition = options.partition ?? 0;
      const at = `${topic}-${partition}`;
      const first = offsets.get(at) ?? 0;
      offsets.set(at, first + values.length);
      const records = values.map((value, i) =>
        mskRecord({
          topic,
          partition,
          offset: first + i,
          value,
          key: options.key === undefined ? aggregateKeyOf(value) : options.key(value, i),
          ...(options.headers === undefined ? {} : { headers: options.headers }),
        }),
      );
      return deliverRecords(records);
    },
    work: (observability = {}) =>
      runWorker({
        sql: workerSql,
        consumer: declaration,
        config: { worker: { batchSize: 100, safetyMarginMs: 1_000, leaseSeconds: 300 } },
        ...quiet('worker'),
        ...observability,
        owner: newOwnerId('test'),
        remainingMs: () => 600_000,
      }),
    rows: () => db.sql<InboxRowState[]>`
      select event_id as "eventId", event_type as "eventType", aggregate_id as "aggregateId", topic_name as topic,
             partition_no as partition, offset_no as offset, status, attempt_count as attempts,
             error_code as "errorCode", error_detail as "errorDetail"
      from integration.consumer_inbox where consumer_name = ${declaration.name}
      order by received_at, topic_name, partition_no, offset_no`,
    poison: () => db.sql<PoisonState[]>`
      select topic_name as topic, partition_no as partition, offset_no as offset, error_code as "errorCode"
      from integration.consumer_raw_poison where consumer_name = ${declaration.name}
      order by topic_name, partition_no, offset_no`,
  };
}
