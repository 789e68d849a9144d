/**
 * The simulated event-source mapping against a fake ingest function (the real one is
 * exercised by test/db/local): what it delivers, and what it does with each kind of answer.
 */
import { describe, expect, it } from 'vitest';
import type { KafkaBatchResponse, KafkaEvent } from '../../../functions/ingest/types';
import type { ProducedRecord } from '../../../tools/local/generator';
import { readFailures, SimulatedMapping, type Invoke, type MappingOptions } from '../../../tools/local/mapping';

const TOPIC = 't';

function log(n: number): ProducedRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    key: `k${i}`,
    value: Buffer.from(JSON.stringify({ i })),
    headers: {},
    timestamp: 0,
    label: { kind: 'event' as const, eventId: `e${i}` },
  }));
}

interface Delivery {
  partition: number;
  offsets: number[];
}

function recorder(answer: (event: KafkaEvent, call: number) => KafkaBatchResponse | Promise<KafkaBatchResponse>) {
  const deliveries: Delivery[][] = [];
  const invoke: Invoke = async (event) => {
    deliveries.push(Object.values(event.records).map((rs) => ({ partition: rs[0]!.partition, offsets: rs.map((r) => r.offset) })));
    return answer(event, deliveries.length);
  };
  return { deliveries, invoke };
}

const ok = (): KafkaBatchResponse => ({ batchItemFailures: [] });

function mapping(overrides: Partial<MappingOptions> & Pick<MappingOptions, 'invoke'>): SimulatedMapping {
  return new SimulatedMapping({
    consumerName: 'c',
    topic: TOPIC,
    partitions: [log(25), log(10)],
    batchSize: 8,
    pollers: 1,
    seed: 1,
    redeliveryRate: 0,
    infraFailureRate: 0,
    invokeUnreachable: overrides.invoke,
    retryDelayMs: 0,
    ...overrides,
  });
}

function deliveredPerPartition(deliveries: Delivery[][], partition: number): number[][] {
  return deliveries
    .flat()
    .filter((d) => d.partition === partition)
    .map((d) => d.offsets);
}

describe('SimulatedMapping', () => {
  it('delivers every record once, in order, in batches of at most batchSize, then commits the end', async () => {
    const r = recorder(ok);
    const m = mapping({ invoke: r.invoke });
    await m.run();
    expect(m.committed).toEqual([25, 10]);
    expect(r.deliveries.every((batch) => batch.reduce((n, d) => n + d.offsets.length, 0) <= 8)).toBe(true);
    expect(deliveredPerPartition(r.deliveries, 0).flat()).toEqual(Array.from({ length: 25 }, (_, i) => i));
    expect(deliveredPerPartition(r.deliveries, 1).flat()).toEqual(Array.from({ length: 10 }, (_, i) => i));
  });

  it('retries a reported partition from the reported offset, later records included, and moves the others on', async () => {
    const r = recorder((event, call) =>
      call === 1 && event.records[`${TOPIC}-0`] !== undefined
        ? { batchItemFailures: [{ itemIdentifier: { partition: `${TOPIC}-0`, offset: 3 } }] }
        : ok(),
    );
    const m = mapping({ invoke: r.invoke, partitions: [log(8), log(4)] });
    await m.run();
    const p0 = deliveredPerPartition(r.deliveries, 0);
    expect(p0[0]).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(p0.slice(1).flat()).toEqual([3, 4, 5, 6, 7]);
    expect(m.stats.reportedFailures).toBe(1);
    expect(m.committed).toEqual([8, 4]);
  });

  it('retries the whole batch when the function throws or names an item not in the batch', async () => {
    const r = recorder((_event, call) => {
      if (call === 1) throw new Error('function error');
      if (call === 2) return { batchItemFailures: [{ itemIdentifier: { partition: `${TOPIC}-9`, offset: 0 } }] };
      return ok();
    });
    const m = mapping({ invoke: r.invoke, partitions: [log(3)], batchSize: 10 });
    await m.run();
    expect(deliveredPerPartition(r.deliveries, 0)).toEqual([
      [0, 1, 2],
      [0, 1, 2],
      [0, 1, 2],
    ]);
    expect(m.stats.functionErrors).toBe(2);
  });

  it('never moves a partition on while its failure keeps being reported', async () => {
    const r = recorder((event) => {
      const rs = event.records[`${TOPIC}-0`];
      return rs ? { batchItemFailures: [{ itemIdentifier: { partition: `${TOPIC}-0`, offset: rs[0]!.offset } }] } : ok();
    });
    const m = mapping({ invoke: r.invoke, partitions: [log(5)] });
    const run = m.run();
    await new Promise((resolve) => setTimeout(resolve, 50));
    m.stop();
    await run;
    expect(m.committed).toEqual([0]);
    expect(m.done).toBe(false);
    expect(deliveredPerPartition(r.deliveries, 0).every((offsets) => offsets[0] === 0)).toBe(true);
  });

  it('redelivers on purpose at the redelivery rate, the same way for the same seed', async () => {
    const runOnce = async () => {
      const r = recorder(ok);
      const m = mapping({ invoke: r.invoke, redeliveryRate: 0.5, partitions: [log(40)] });
      await m.run();
      return { offsets: deliveredPerPartition(r.deliveries, 0), stats: m.stats };
    };
    const a = await runOnce();
    const b = await runOnce();
    expect(a.stats.injectedRedeliveries).toBeGreaterThan(0);
    expect(a.stats.redelivered).toBeGreaterThan(0);
    expect(b.offsets).toEqual(a.offsets);
    // Every delivery resumes at or below where the previous one ended: nothing is skipped.
    let next = 0;
    for (const offsets of a.offsets) {
      expect(offsets[0]).toBeLessThanOrEqual(next);
      next = offsets[offsets.length - 1]! + 1;
    }
    expect(next).toBe(40);
  });

  it('sends some invocations to the unreachable database at the infra failure rate', async () => {
    const live = recorder(ok);
    const dead = recorder((event) => ({
      batchItemFailures: Object.values(event.records).map((rs) => ({
        itemIdentifier: { partition: `${TOPIC}-${rs[0]!.partition}`, offset: rs[0]!.offset },
      })),
    }));
    const m = mapping({ invoke: live.invoke, invokeUnreachable: dead.invoke, infraFailureRate: 0.4, partitions: [log(40), log(40)] });
    await m.run();
    expect(dead.deliveries.length).toBe(m.stats.infraFailures);
    expect(m.stats.infraFailures).toBeGreaterThan(0);
    expect(m.committed).toEqual([40, 40]);
    expect(
      live.deliveries
        .flat()
        .filter((d) => d.partition === 0)
        .flatMap((d) => d.offsets),
    ).toEqual(expect.arrayContaining(Array.from({ length: 40 }, (_, i) => i)));
  });
});

describe('readFailures', () => {
  const slices = [{ partition: 0, start: 10, end: 20, delivery: 1 }];
  it('keeps the lowest offset per partition', () => {
    const failures = readFailures(
      {
        batchItemFailures: [
          { itemIdentifier: { partition: `${TOPIC}-0`, offset: 15 } },
          { itemIdentifier: { partition: `${TOPIC}-0`, offset: 12 } },
        ],
      },
      TOPIC,
      slices,
    );
    expect(failures).toEqual(new Map([[0, 12]]));
  });
  it('rejects an offset outside the batch', () => {
    expect(
      readFailures({ batchItemFailures: [{ itemIdentifier: { partition: `${TOPIC}-0`, offset: 20 } }] }, TOPIC, slices),
    ).toBeUndefined();
  });

  it('steady load: delivers a record only once its producer has written it', async () => {
    const r = recorder(ok);
    let written = 3;
    const m = mapping({
      partitions: [log(6).map((rec, i) => ({ ...rec, timestamp: i }))],
      batchSize: 100,
      releasedAt: (timestamp) => (timestamp < written ? 0 : Infinity),
      invoke: r.invoke,
    });

    const running = m.run();
    while (m.committed[0]! < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    const beforeTheRest = deliveredPerPartition(r.deliveries, 0).flat();
    written = 6;
    await running;

    expect(beforeTheRest).toEqual([0, 1, 2]);
    expect(deliveredPerPartition(r.deliveries, 0).flat()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(m.committed).toEqual([6]);
  });

  it('steady load: a partial batch waits for the batching window, a full one goes at once', async () => {
    const r = recorder(ok);
    const released: number[] = [performance.now(), Infinity, Infinity, Infinity];
    const m = mapping({
      partitions: [log(4).map((rec, i) => ({ ...rec, timestamp: i }))],
      batchSize: 3,
      releasedAt: (timestamp) => released[timestamp]!,
      batchingWindowMs: 60_000,
      invoke: r.invoke,
    });

    const running = m.run();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const whileAlone = r.deliveries.length;
    released[1] = released[2] = performance.now();
    while (m.committed[0]! < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    // The last record, alone again: written a whole window ago, so it goes.
    released[3] = performance.now() - 60_000;
    await running;

    expect(whileAlone).toBe(0);
    expect(deliveredPerPartition(r.deliveries, 0)).toEqual([[0, 1, 2], [3]]);
  });
});
