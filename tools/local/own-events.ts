/**
 * The local run on your own events (`npm start -- --consumer <name> --events <file>`): one
 * consumer, fed the values of a file instead of the generated stream, under the same faults
 * (duplicates, redeliveries, unreachable database, transient handler failures, worker
 * crashes). What each event must become is the consumer's business, so the run checks what
 * holds for any consumer (checks.ts, OWN_CHECKS): every record stored once or captured as
 * poison, every row final, effects committed once per processed row, no missing grant.
 *
 * The file: one value per line, as the records' bytes (an envelope in the consumer's dialect,
 * or whatever its format is); blank lines are skipped. A line that is a JSON envelope is keyed
 * by its aggregate id (Kafka's partitioner then keeps an aggregate's events in order).
 *
 * `--declarations <module>` runs consumers that are not in functions/consumers/index.ts: the
 * module exports `CONSUMERS` (declarations) and may export `SETUP_SQL` (what their migration
 * would create: run as the owner after the migrations, before their roles are provisioned).
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CONSUMERS } from '../../functions/consumers/index';
import type { ConsumerDeclaration } from '../../functions/framework/types';
import type { Fault, GeneratedStream, ProducedRecord } from './generator';
import { partitionOf } from './generator';
import type { LocalOptions } from './options';
import { createRandom } from './random';

/** A record of the file, where it was produced, and the event id it carries (null: none could be read). */
export interface OwnRecord {
  topic: string;
  partition: number;
  offset: number;
  eventId: string | null;
}

/** The consumer a run on its own events is about, and its records. */
export interface OwnEvents {
  consumer: string;
  records: OwnRecord[];
}

export class OwnEventsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OwnEventsError';
  }
}

export interface ExtraDeclarations {
  consumers: ConsumerDeclaration[];
  setupSql: string | undefined;
}

/** The consumers of a `--declarations` module, and its setup SQL. */
export async function loadDeclarations(path: string | null): Promise<ExtraDeclarations> {
  if (path === null) return { consumers: [], setupSql: undefined };
  const module = (await import(pathToFileURL(resolve(path)).href)) as { CONSUMERS?: unknown; SETUP_SQL?: unknown };
  if (!Array.isArray(module.CONSUMERS)) throw new OwnEventsError(`--declarations ${path}: exports no CONSUMERS array`);
  const consumers = module.CONSUMERS as ConsumerDeclaration[];
  const taken = consumers.find((c) => CONSUMERS.some((d) => d.name === c.name));
  if (taken !== undefined) throw new OwnEventsError(`--declarations ${path}: "${taken.name}" is declared already`);
  return { consumers, setupSql: typeof module.SETUP_SQL === 'string' ? module.SETUP_SQL : undefined };
}

function fieldOf(value: unknown, ...names: string[]): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  for (const name of names) {
    const v = (value as Record<string, unknown>)[name];
    if (typeof v === 'string' && v !== '') return v;
  }
  return null;
}

function parsed(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/**
 * The stream of the file's values for `consumer`: on its first topic, partitioned by
 * aggregate id, with duplicates at later offsets (`duplicateRate`) and transient handler
 * failures (`transientRate`) planned from the seed.
 */
export async function ownStream(options: LocalOptions, consumer: ConsumerDeclaration, file: string): Promise<GeneratedStream> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new OwnEventsError(`--events ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) throw new OwnEventsError(`--events ${file}: no values (one a line)`);
  const rng = createRandom(options.seed);
  const topic = consumer.topics[0]!;
  const partitions: ProducedRecord[][] = Array.from({ length: options.partitions }, () => []);
  const records: OwnRecord[] = [];
  const faults = new Map<string, Fault>();
  const epoch = Date.parse('2026-07-03T09:00:00Z');
  const produce = (line: string, time: number, kind: 'event' | 'duplicate') => {
    const value = parsed(line);
    const eventId = fieldOf(value, 'eventId', 'event_id');
    const key = fieldOf(value, 'aggregateId', 'aggregate_id');
    const partition = key === null ? Math.floor(rng.next() * options.partitions) : partitionOf(key, options.partitions);
    const log = partitions[partition]!;
    records.push({ topic, partition, offset: log.length, eventId });
    log.push({
      key,
      value: Buffer.from(line, 'utf8'),
      headers: {},
      timestamp: epoch + time * 1000,
      label: { kind, eventId: eventId ?? `line-${time}` },
    });
  };
  let duplicates = 0;
  lines.forEach((line, i) => {
    produce(line, i, 'event');
    const eventId = fieldOf(parsed(line), 'eventId', 'event_id');
    if (eventId !== null && !faults.has(eventId) && rng.chance(options.transientRate)) {
      faults.set(eventId, { kind: 'transient', via: rng.chance(0.5) ? 'retryable-error' : 'serialization-failure', failures: 1 });
    }
  });
  // A producer's retries: the same value again, later.
  lines.forEach((line, i) => {
    if (!rng.chance(options.duplicateRate)) return;
    produce(line, lines.length + i, 'duplicate');
    duplicates += 1;
  });
  return {
    seed: options.seed,
    topics: new Map([[topic, partitions]]),
    expected: new Map([[consumer.name, new Map()]]),
    poison: new Map([[consumer.name, []]]),
    faults: new Map([[consumer.name, faults]]),
    cases: [],
    notifications: new Map(),
    clock: { startsAt: epoch, spanMs: Math.max(records.length, 10) * 1000 },
    counts: {
      events: lines.length,
      caseEvents: 0,
      payments: 0,
      duplicates,
      poison: 0,
      invalid: 0,
      outOfOrderCases: 0,
      faults: faults.size,
    },
    own: { consumer: consumer.name, records },
  };
}
