/**
 * The batch write: a batch's inbox rows and poison rows, stored in ONE transaction.
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
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { ConsumerDeclaration } from '../framework/types';
import { insertInboxBatchCount, insertInboxBatchLeased, type InboxInsert } from '../inbox/insert-batch';
import { recordPoison, type PoisonInsert } from '../inbox/record-poison';
import type { InboxRow, Outcome } from '../inbox/types';
import type { Sql, TransactionSql } from '../lib/db';
import { classifyError, isInfrastructureError, serverSafe, sqlStateOf } from '../lib/errors';
import type { Span } from '@opentelemetry/api';
import { startRowSpans } from '../framework/row-spans';
import { processInline } from './inline-processing';
import { PoisonCodes } from './poison-codes';

/**
 * How long an inline row's lease lasts. Nobody else ever sees the lease: the rows are
 * inserted PROCESSING and completed in the same transaction. The schema requires one, and
 * if a future change ever committed a PROCESSING row, the reaper would free it this soon.
 */
export const INLINE_LEASE_SECONDS = 60;

export type StoreStrategy = 'direct' | 'bisect' | 'deferred' | 'poison-all';

export interface Stored {
  inserted: number;
  poisoned: number;
  poisonRecords: number;
  outcomes: Outcome[];
}

/** What the store writes with: the consumer's database, and where a rung's failure is logged. */
export interface StoreContext {
  sql: Sql;
  consumer: ConsumerDeclaration;
  logger: Pick<Logger, 'error' | 'warn'>;
}

/** SQLSTATE classes that mean "this data", not "this database": data exception, integrity, program limit. */
const DATA_ERROR_CLASSES = new Set(['22', '23', '54']);

export function isDataError(error: unknown): boolean {
  const state = sqlStateOf(error);
  return state !== undefined && DATA_ERROR_CLASSES.has(state.slice(0, 2));
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

interface WriteOptions {
  splitting: boolean;
  inline: boolean;
  owner: string;
  /** The ingest batch's span: the parent of the inline rows' processing spans without a producer context. */
  span?: Span | undefined;
}

/** One rung's transaction: the inbox rows and the poison rows, the new rows processed when inline. */
async function write(ctx: StoreContext, valid: InboxInsert[], poison: PoisonInsert[], options: WriteOptions): Promise<Stored> {
  const { sql, consumer } = ctx;
  if (!options.splitting && !options.inline && poison.length === 0) {
    // The common batch: nothing else has to commit with the inbox rows, and one INSERT
    // is atomic by itself. One round trip instead of BEGIN, INSERT, COMMIT.
    const inserted = await insertInboxBatchCount(sql, consumer.name, valid);
    return { inserted, poisoned: 0, poisonRecords: 0, outcomes: [] };
  }
  const stored = await sql.begin(async (tx) => {
    const leased: InboxRow[] = [];
    let inserted = 0;
    const insert: InsertRows = async (q, rows) => {
      if (options.inline) {
        const got = await insertInboxBatchLeased(q, consumer.name, rows, { owner: options.owner, leaseSeconds: INLINE_LEASE_SECONDS });
        leased.push(...got);
        inserted += got.length;
      } else {
        inserted += await insertInboxBatchCount(q, consumer.name, rows);
      }
    };
    const written = options.splitting
      ? await writeBisecting(tx, consumer.name, valid, poison, insert)
      : await writePipelined(tx, consumer.name, valid, poison, insert);
    const spans = options.inline ? startRowSpans(leased, options.span) : undefined;
    const outcomes = spans !== undefined ? await processInline(tx, consumer, ctx.logger, leased, options.owner, spans) : [];
    return { stored: { inserted, ...written, outcomes }, spans, leased };
  });
  // Committed: the inline rows' spans end with their outcomes (a rung that failed left them unended).
  const byId = new Map(stored.leased.map((r) => [r.inbox_id, r]));
  stored.spans?.end(
    stored.stored.outcomes.flatMap((outcome) => (byId.has(outcome.inboxId) ? [{ row: byId.get(outcome.inboxId)!, outcome }] : [])),
  );
  return stored.stored;
}

type InsertRows = (q: TransactionSql, rows: readonly InboxInsert[]) => Promise<void>;

/** Pipelined: both statements leave in one write, one wait for both answers. */
async function writePipelined(
  tx: TransactionSql,
  consumerName: string,
  valid: InboxInsert[],
  poison: PoisonInsert[],
  insert: InsertRows,
): Promise<{ poisoned: number; poisonRecords: number }> {
  const [, poisoned] = await Promise.all([insert(tx, valid), recordPoison(tx, consumerName, poison)]);
  return { poisoned, poisonRecords: poison.length };
}

/**
 * The bisect rung's writes: the inbox rows split until the refused ones are found (they
 * become poison UNSTORABLE_VALUE), then every poison row the same way, a refused one
 * stored bare.
 */
async function writeBisecting(
  tx: TransactionSql,
  consumerName: string,
  valid: InboxInsert[],
  poison: PoisonInsert[],
  insert: InsertRows,
): Promise<{ poisoned: number; poisonRecords: number }> {
  const allPoison = [...poison];
  let poisoned = 0;
  const unstorable: PoisonInsert[] = [];
  await writeSplitting(tx, valid, insert, (row, error) =>
    unstorable.push(asPoison(row, PoisonCodes.UNSTORABLE_VALUE, `PostgreSQL refused the row (SQLSTATE ${sqlStateOf(error) ?? 'unknown'})`)),
  );
  allPoison.push(...unstorable);
  const bareRows: PoisonInsert[] = [];
  await writeSplitting(
    tx,
    allPoison,
    async (q, rows) => {
      poisoned += await recordPoison(q, consumerName, rows);
    },
    (row, error) => bareRows.push(bare(row, error)),
  );
  poisoned += await recordPoison(tx, consumerName, bareRows);
  return { poisoned, poisonRecords: allPoison.length };
}

/** The ladder described at the top of this file. Throws only what must be reported back. */
export async function storeBatch(
  ctx: StoreContext,
  valid: InboxInsert[],
  poison: PoisonInsert[],
  owner: string,
  inline: boolean,
  span?: Span,
): Promise<Stored & { strategy: StoreStrategy }> {
  let sorted: InboxInsert[] | undefined;
  const ordered = () => (sorted ??= byEventId(valid));
  const rungs: Array<{ strategy: StoreStrategy; run: () => Promise<Stored>; after: (e: unknown) => boolean }> = [
    { strategy: 'direct', run: () => write(ctx, valid, poison, { splitting: false, inline, owner, span }), after: () => true },
    { strategy: 'bisect', run: () => write(ctx, ordered(), poison, { splitting: true, inline, owner, span }), after: isDataError },
    ...(inline
      ? [
          {
            strategy: 'deferred' as const,
            run: () => write(ctx, ordered(), poison, { splitting: true, inline: false, owner }),
            after: () => true,
          },
        ]
      : []),
    {
      strategy: 'poison-all',
      run: () =>
        write(
          ctx,
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
      ctx.logger.error('ingest store failed, stepping down', {
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
