/**
 * A simulated MSK event-source mapping: one per (consumer group, topic), as in AWS, where
 * each consumer's ingest function has its own mapping and its own committed offsets — one
 * topic read by two consumers feeds both.
 *
 * It behaves as the real one does where the inbox's guarantees are concerned:
 *
 * - Batches of up to `batchSize` records, from one or several partitions, each partition's
 *   records contiguous and in offset order, keyed "<topic>-<partition>"; at most one batch
 *   in flight per partition (the mapping keeps per-partition order), `pollers` in parallel.
 * - The response is read as AWS documents it: for a partition with a reported item failure
 *   the mapping commits below the reported offset and redelivers from there, later records
 *   included; a partition without one is committed past the batch. A response naming a
 *   partition or offset that was not in the batch, or a function error (the handler
 *   throws), makes the whole batch retry. No partition ever moves past a failure that was
 *   not reported as handled.
 * - Redeliveries as in production (a rebalance, a poller restart, a lost commit): after a
 *   successful batch the commit is sometimes lost, for the whole batch or for its tail, and
 *   the records come again.
 * - Infrastructure failures: some invocations go to an ingest function whose database is
 *   unreachable; it must report every partition back, and the retry must then store all.
 *
 * - Steady load (`releasedAt`): a record exists in the topic only from the moment its
 *   producer writes it, and the mapping waits, as the real one does, until a batch is full
 *   or its oldest record has waited the batching window (MaximumBatchingWindowInSeconds).
 *   Redelivered records go again at once.
 *
 * Retries are unbounded, like the mapping's default (no maximum retry attempts or record
 * age): a record that keeps failing blocks its partition, which the run's timeout reports.
 * Every random decision is a keyed draw (seed, consumer, partition, delivery number), so
 * it does not depend on how concurrent deliveries interleave.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { KafkaBatchResponse, KafkaEvent, KafkaRecord } from '../../functions/ingest/types';
import { mskEvent, mskRecord } from '../msk-events';
import type { ProducedRecord } from './generator';
import { keyedChance, keyedDraw } from './random';

export type Invoke = (event: KafkaEvent) => Promise<KafkaBatchResponse>;

export interface MappingOptions {
  consumerName: string;
  topic: string;
  /** The topic's partitions: records in offset order. */
  partitions: readonly (readonly ProducedRecord[])[];
  batchSize: number;
  pollers: number;
  seed: number;
  redeliveryRate: number;
  infraFailureRate: number;
  /** The consumer's ingest function. */
  invoke: Invoke;
  /** The same function wired to a database that cannot be reached. */
  invokeUnreachable: Invoke;
  /** Pause after a failed delivery before its partitions are polled again (the mapping backs off). */
  retryDelayMs?: number;
  /** Told of every fault the mapping injects, as it happens (the run's report marks them). */
  onFault?: (kind: 'database-unreachable' | 'commit-lost') => void;
  /**
   * When a record with this timestamp is written to the topic (performance.now()
   * milliseconds). Absent: the whole topic exists from the start.
   */
  releasedAt?: (timestamp: number) => number;
  /** Deliver a partition's records once this many milliseconds old even if the batch is not full. */
  batchingWindowMs?: number;
}

export interface MappingStats {
  batches: number;
  /** Records delivered, redeliveries included. */
  records: number;
  /** Records delivered again after a first delivery. */
  redelivered: number;
  /** Deliveries whose commit the mapping lost on purpose. */
  injectedRedeliveries: number;
  /** Deliveries sent to the unreachable-database function. */
  infraFailures: number;
  /** Partitions reported back by the function (batch item failures). */
  reportedFailures: number;
  /** Invocations that threw or answered with an item not in the batch: whole batch retried. */
  functionErrors: number;
}

export interface Slice {
  partition: number;
  start: number;
  end: number;
  delivery: number;
}

export class SimulatedMapping {
  readonly stats: MappingStats = {
    batches: 0,
    records: 0,
    redelivered: 0,
    injectedRedeliveries: 0,
    infraFailures: 0,
    reportedFailures: 0,
    functionErrors: 0,
  };
  /** Per partition: the next offset to deliver (everything below is committed). */
  readonly committed: number[];
  /** Per partition: one past the highest offset ever delivered. */
  private readonly highWater: number[];
  private readonly deliveries: number[];
  /** Per partition: one past the highest offset its producer has written so far. */
  private readonly produced: number[];
  private readonly inFlight = new Set<number>();
  private cursor = 0;
  private stopped = false;
  private holding = false;

  constructor(private readonly options: MappingOptions) {
    this.committed = options.partitions.map(() => 0);
    this.highWater = options.partitions.map(() => 0);
    this.deliveries = options.partitions.map(() => 0);
    this.produced = options.partitions.map((log) => (options.releasedAt === undefined ? log.length : 0));
  }

  /** Records of the topic, over all partitions. */
  get total(): number {
    return this.options.partitions.reduce((n, log) => n + log.length, 0);
  }

  /** Records not yet committed, over all partitions (the mapping's offset lag). */
  get lag(): number {
    return this.options.partitions.reduce((n, log, p) => n + log.length - this.committed[p]!, 0);
  }

  get done(): boolean {
    return this.lag === 0 && this.inFlight.size === 0;
  }

  stop(): void {
    this.stopped = true;
  }

  /**
   * Start no delivery until release() (the batches in flight finish): the records wait in
   * the topic, as they would behind a consumer group that has not polled yet.
   */
  hold(): void {
    this.holding = true;
  }

  release(): void {
    this.holding = false;
  }

  /** Deliver until every partition is committed to its end (or stop() is called). */
  async run(): Promise<void> {
    await Promise.all(Array.from({ length: this.options.pollers }, () => this.poll()));
  }

  private async poll(): Promise<void> {
    while (!this.stopped && !this.done) {
      const slices = this.holding ? [] : this.nextBatch();
      if (slices.length === 0) {
        await sleep(2);
        continue;
      }
      try {
        const failed = await this.deliver(slices);
        if (failed) await sleep(this.options.retryDelayMs ?? 20);
      } finally {
        for (const s of slices) this.inFlight.delete(s.partition);
      }
    }
  }

  /** Records written to partition p by now (all of them without a release clock). */
  private producedUpTo(p: number, now: number): number {
    const { releasedAt } = this.options;
    const log = this.options.partitions[p]!;
    if (releasedAt !== undefined) {
      while (this.produced[p]! < log.length && releasedAt(log[this.produced[p]!]!.timestamp) <= now) this.produced[p]! += 1;
    }
    return this.produced[p]!;
  }

  /** A partition's pending records go now: enough of them, or the oldest has waited the window. */
  private ripe(p: number, pending: number, now: number): boolean {
    const { releasedAt, batchingWindowMs = 0, batchSize } = this.options;
    if (releasedAt === undefined || batchingWindowMs === 0 || pending >= batchSize) return true;
    return now - releasedAt(this.options.partitions[p]![this.committed[p]!]!.timestamp) >= batchingWindowMs;
  }

  /** Take up to batchSize records from partitions with pending records and no batch in flight. */
  private nextBatch(): Slice[] {
    const { partitions, batchSize } = this.options;
    const slices: Slice[] = [];
    const now = performance.now();
    let room = batchSize;
    for (let i = 0; i < partitions.length && room > 0; i++) {
      const p = (this.cursor + i) % partitions.length;
      const pending = this.producedUpTo(p, now) - this.committed[p]!;
      if (pending === 0 || this.inFlight.has(p) || !this.ripe(p, pending, now)) continue;
      const take = Math.min(pending, room);
      slices.push({ partition: p, start: this.committed[p]!, end: this.committed[p]! + take, delivery: ++this.deliveries[p]! });
      this.inFlight.add(p);
      room -= take;
    }
    this.cursor = (this.cursor + 1) % partitions.length;
    return slices;
  }

  private toRecord(partition: number, offset: number): KafkaRecord {
    const r = this.options.partitions[partition]![offset]!;
    return mskRecord({
      topic: this.options.topic,
      partition,
      offset,
      timestamp: r.timestamp,
      key: r.key,
      headers: r.headers,
      ...(r.rawValueBase64 !== undefined ? { rawValue: r.rawValueBase64 } : { value: r.value }),
    });
  }

  /** One invocation and what the mapping does with its answer. Resolves true if anything must be retried. */
  private async deliver(slices: readonly Slice[]): Promise<boolean> {
    const { seed, consumerName, topic } = this.options;
    const first = slices[0]!;
    const records = slices.flatMap((s) => Array.from({ length: s.end - s.start }, (_, i) => this.toRecord(s.partition, s.start + i)));
    for (const s of slices) {
      this.stats.redelivered += Math.max(0, Math.min(s.end, this.highWater[s.partition]!) - s.start);
      this.highWater[s.partition] = Math.max(this.highWater[s.partition]!, s.end);
    }
    this.stats.batches += 1;
    this.stats.records += records.length;

    const unreachable = keyedChance(this.options.infraFailureRate, seed, consumerName, topic, 'infra', first.partition, first.delivery);
    if (unreachable) {
      this.stats.infraFailures += 1;
      this.options.onFault?.('database-unreachable');
    }
    let response: KafkaBatchResponse;
    try {
      response = await (unreachable ? this.options.invokeUnreachable : this.options.invoke)(mskEvent(records));
    } catch {
      this.stats.functionErrors += 1;
      return true;
    }

    const failures = readFailures(response, topic, slices);
    if (failures === undefined) {
      this.stats.functionErrors += 1;
      return true;
    }
    this.stats.reportedFailures += failures.size;
    for (const s of slices) {
      const failedAt = failures.get(s.partition);
      if (failedAt !== undefined) {
        this.committed[s.partition] = failedAt;
        continue;
      }
      this.committed[s.partition] = s.end;
      if (keyedChance(this.options.redeliveryRate, seed, consumerName, topic, 'redeliver', s.partition, s.delivery)) {
        // The commit is lost: half the time for the whole batch, otherwise for its tail.
        const whole = keyedDraw(seed, consumerName, topic, 'whole', s.partition, s.delivery) < 0.5;
        const size = s.end - s.start;
        const keep = whole ? 0 : Math.floor(keyedDraw(seed, consumerName, topic, 'keep', s.partition, s.delivery) * size);
        this.committed[s.partition] = s.start + keep;
        this.stats.injectedRedeliveries += 1;
        this.options.onFault?.('commit-lost');
      }
    }
    return failures.size > 0;
  }
}

/**
 * The lowest reported offset per partition, or undefined when the response names an item
 * that was not in the batch (AWS then retries the whole batch).
 */
export function readFailures(response: KafkaBatchResponse, topic: string, slices: readonly Slice[]): Map<number, number> | undefined {
  const failures = new Map<number, number>();
  const items = Array.isArray(response?.batchItemFailures) ? response.batchItemFailures : [];
  for (const item of items) {
    const id = item?.itemIdentifier;
    const slice = slices.find((s) => id !== undefined && id.partition === `${topic}-${s.partition}`);
    if (slice === undefined || typeof id.offset !== 'number' || id.offset < slice.start || id.offset >= slice.end) return undefined;
    failures.set(slice.partition, Math.min(failures.get(slice.partition) ?? Infinity, id.offset));
  }
  return failures;
}
