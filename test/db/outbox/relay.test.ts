/**
 * The relay against a real PostgreSQL, producer calls counted through its interface: it
 * publishes each aggregate's events in order, marks published only what the producer
 * acknowledged, backs off a refused head without letting anything of its aggregate overtake
 * it, takes over the lanes of a relay that died, and two relays racing publish each row once.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { normalizeEnvelope } from '../../../functions/framework/envelopes';
import { caseSla } from '../../../functions/consumers/case-sla';
import { claimOutbox, claimOutboxStatement } from '../../../functions/outbox/claim-outbox';
import { completeOutbox } from '../../../functions/outbox/complete-outbox';
import { relayRoleOf } from '../../../functions/lib/database-roles';
import { MetricNames } from '../../../functions/lib/metric-names';
import { createMskProducer } from '../../../functions/relay/kafka-producer';
import { freePort } from '../../../tools/embedded-postgres';
import { useTestDatabase } from '../../helpers/db';
import { rowsVisited, type PlanNode } from '../../helpers/plans';
import { insertInboxRow, caseAcceptedPayload } from '../../helpers/factories';
import { MetricsRecorder } from '../reaper/support';
import { work } from '../worker/support';
import { CountingProducer, insertOutboxRows, outboxStates, relay, relayConfig } from './support';

const db = await useTestDatabase();
const sql = db.sql;

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, integration.outbox, integration.outbox_lane, case_core.case_audit, case_core.sla_obligation restart identity`;
});

async function laneRows() {
  return sql<{ aggregate_id: string; locked_by: string | null; due_in_seconds: number | null }[]>`
    select aggregate_id, locked_by, extract(epoch from due_at - now())::float8 as due_in_seconds
    from integration.outbox_lane order by aggregate_id`;
}

describe('publishing in order', () => {
  it('each aggregate’s events go out in outbox order, keyed by the aggregate; all marked published; no lane left', async () => {
    const rows = await insertOutboxRows(
      sql,
      ['A', 'B', 'A', 'C', 'B', 'A', 'A', 'C', 'A'].map((aggregateId) => ({ aggregateId })),
    );
    const producer = new CountingProducer();

    // Runs of two rows: several claims per aggregate, each after the previous was recorded.
    const result = await relay(sql, producer, { config: relayConfig({ runLength: 2, batchSize: 4 }) });

    expect(result).toMatchObject({ claimed: 9, published: 9, refused: 0, returned: 0, lost: 0 });
    for (const key of ['A', 'B', 'C']) {
      expect(producer.eventIdsOf(key)).toEqual(rows.filter((r) => r.aggregate_id === key).map((r) => r.event_id));
    }
    expect(producer.accepted.every((m) => m.key === JSON.parse(m.value).aggregateId)).toBe(true);
    expect((await outboxStates(sql)).every((s) => s.published && s.claimed_by === null)).toBe(true);
    expect(await laneRows()).toEqual([]);
  });

  it('one send per aggregate run, acks awaited before the next; the message is the canonical envelope our own inbox accepts', async () => {
    await insertInboxRow(sql, {
      consumerName: 'case-sla',
      eventId: 'evt_env',
      correlationId: 'corr_env',
      aggregateId: 'case_env',
      payload: caseAcceptedPayload('case_env'),
    });
    await work(sql, caseSla);
    const producer = new CountingProducer();

    await relay(sql, producer);

    expect(producer.calls).toHaveLength(1);
    const [call] = producer.calls;
    expect(call!.topic).toBe('regulatory.case.sla-obligations.v1');
    expect(call!.messages).toHaveLength(1);
    const envelope = JSON.parse(call!.messages[0]!.value);
    expect(normalizeEnvelope({ dialect: 'canonical' }, envelope)).toMatchObject({ ok: true });
    expect(envelope).toMatchObject({
      eventType: 'regulatory.case.sla-obligation-opened.v1',
      eventVersion: 1,
      producer: 'case-sla',
      correlationId: 'corr_env',
      causationId: 'evt_env',
      aggregateType: 'case',
      aggregateId: 'case_env',
      partitionKey: 'case_env',
      payload: { caseId: 'case_env', obligationType: 'INITIAL_ASSESSMENT_DUE', dueAt: '2026-07-08T09:15:30.000Z' },
    });
    expect(call!.messages[0]!.key).toBe('case_env');
    expect(call!.messages[0]!.headers).toEqual({ eventId: envelope.eventId, eventType: envelope.eventType });
  });
});

describe('what a claim says of each lane', () => {
  it('more: the lane has unpublished rows after its run (cut by the run length or the claim limit), and not when the run took them all', async () => {
    // A: 3 rows, runs of 2 → more; B: 2 rows → none left; C: 2 rows, cut to 1 by the limit → more.
    await insertOutboxRows(
      sql,
      ['A', 'A', 'A', 'B', 'B', 'C', 'C'].map((aggregateId) => ({ aggregateId })),
    );

    const claim = await claimOutbox(sql, { owner: 'relay-test', limit: 5, runLength: 2, leaseSeconds: 60 });

    expect(claim.lanes.map((l) => [l.aggregateId, l.rows.length, l.more])).toEqual([
      ['A', 2, true],
      ['B', 2, false],
      ['C', 1, true],
    ]);
  });

  it('a claim of 200 rows over 200 lanes does work in proportion to the batch, not to its square', async () => {
    const aggregates = Array.from({ length: 300 }, (_, n) => `case_${n}`);
    await insertOutboxRows(
      sql,
      [...aggregates, ...aggregates].map((aggregateId) => ({ aggregateId })),
    );
    const statement = claimOutboxStatement(sql, { owner: 'relay-test', limit: 200, runLength: 50, leaseSeconds: 60 });

    const [row] = await sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>`explain (analyze, format json) ${statement}`;
    const plan = row!['QUERY PLAN'][0].Plan;

    expect(plan['Actual Rows']).toBe(200);
    // Some twenty steps each see every claimed row or lane about once (10,000 rows in all);
    // a step comparing every pair of the batch's rows (a subplan per row, a nested loop
    // over a CTE) visits 40,000 on its own: with a subplan per row, this claim visited 24 million.
    expect(rowsVisited(plan)).toBeLessThan(100 * 200);
  });

  it('the same claim as the consumer’s relay role, under its row-level security policy and filtered to its consumer: the same budget', async () => {
    const aggregates = Array.from({ length: 300 }, (_, n) => `case_${n}`);
    await insertOutboxRows(
      sql,
      [...aggregates, ...aggregates].map((aggregateId) => ({ aggregateId })),
    );
    // Another emitting consumer's backlog on the same aggregates: not the relay's to see or claim.
    await insertOutboxRows(
      sql,
      aggregates.map((aggregateId) => ({ aggregateId, consumerName: 'other-emitter' })),
    );
    await sql`analyze integration.outbox, integration.outbox_lane`;
    const asRelay = db.as(relayRoleOf(caseSla));
    const statement = claimOutboxStatement(asRelay, {
      owner: 'relay-test',
      consumerName: caseSla.name,
      limit: 200,
      runLength: 50,
      leaseSeconds: 60,
    });

    const [row] = await asRelay<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>`explain (analyze, format json) ${statement}`;
    const plan = row!['QUERY PLAN'][0].Plan;

    expect(plan['Actual Rows']).toBe(200);
    expect(rowsVisited(plan)).toBeLessThan(100 * 200);
    const claimed = await sql<{ consumer_name: string; n: number }[]>`
      select consumer_name, count(*)::int as n from integration.outbox where claimed_by = 'relay-test' group by consumer_name`;
    expect(claimed).toEqual([{ consumer_name: 'case-sla', n: 200 }]);
  });
});

describe('refusals', () => {
  it('a refused head is not marked published; it backs off, its aggregate’s later rows wait untouched, other aggregates go out', async () => {
    const rows = await insertOutboxRows(sql, [{ aggregateId: 'X' }, { aggregateId: 'Y' }, { aggregateId: 'X' }, { aggregateId: 'X' }]);
    const producer = new CountingProducer({ refuse: (call) => call.messages.some((m) => m.key === 'X') });

    const result = await relay(sql, producer);

    expect(result).toMatchObject({ claimed: 4, published: 1, refused: 1, returned: 2 });
    const states = await outboxStates(sql);
    expect(
      states.map(({ aggregate_id, published, claimed_by, attempt_count, last_error_code }) => ({
        aggregate_id,
        published,
        claimed_by,
        attempt_count,
        last_error_code,
      })),
    ).toEqual([
      { aggregate_id: 'X', published: false, claimed_by: null, attempt_count: 1, last_error_code: 'PUBLISH_REFUSED' },
      { aggregate_id: 'Y', published: true, claimed_by: null, attempt_count: 0, last_error_code: null },
      { aggregate_id: 'X', published: false, claimed_by: null, attempt_count: 0, last_error_code: null },
      { aggregate_id: 'X', published: false, claimed_by: null, attempt_count: 0, last_error_code: null },
    ]);
    // The first backoff step (1 s, no jitter with random 0), on the head and on its lane.
    expect(states[0]!.due_in_seconds).toBeGreaterThan(0.5);
    expect(await laneRows()).toMatchObject([{ aggregate_id: 'X', locked_by: null, due_in_seconds: expect.any(Number) }]);
    expect(producer.accepted.map((m) => m.eventId)).toEqual([rows[1]!.event_id]);
  });

  it('while the head backs off, another run publishes nothing of its aggregate and does not call the producer for it', async () => {
    await insertOutboxRows(sql, [{ aggregateId: 'X' }, { aggregateId: 'X' }]);
    await relay(sql, new CountingProducer({ refuse: () => true }));
    const producer = new CountingProducer();

    const result = await relay(sql, producer);

    expect(result).toMatchObject({ claimed: 0, published: 0 });
    expect(producer.calls).toEqual([]);
    expect((await outboxStates(sql)).map((s) => s.published)).toEqual([false, false]);
  });

  it('once the backoff has passed the aggregate goes out, in order, head first', async () => {
    const rows = await insertOutboxRows(sql, [{ aggregateId: 'X' }, { aggregateId: 'X' }, { aggregateId: 'X' }]);
    const fast = relayConfig({ backoffSeconds: [0.05] });
    await relay(sql, new CountingProducer({ refuse: () => true }), { config: fast });
    await new Promise((r) => setTimeout(r, 100));
    const producer = new CountingProducer();

    const result = await relay(sql, producer, { config: fast });

    expect(result).toMatchObject({ published: 3 });
    expect(producer.eventIdsOf('X')).toEqual(rows.map((r) => r.event_id));
  });

  it('the real Kafka client with no broker to reach: the send fails after its retries, nothing is marked published', async () => {
    await insertOutboxRows(sql, [{ aggregateId: 'K' }]);
    const producer = createMskProducer(
      {
        brokers: [`127.0.0.1:${await freePort()}`],
        region: 'eu-west-1',
        clientId: 'relay-test',
        connectionTimeoutMs: 300,
        requestTimeoutMs: 1_000,
        retries: 2,
      },
      async () => ({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' }),
    );

    const result = await relay(sql, producer);
    await producer.close();

    expect(result).toMatchObject({ claimed: 1, published: 0, refused: 1 });
    const [row] = await sql<{ published_at: Date | null; last_error_code: string; last_error_message: string }[]>`
      select published_at, last_error_code, last_error_message from integration.outbox`;
    expect(row).toMatchObject({ published_at: null, last_error_code: 'PUBLISH_REFUSED' });
    // The first step (the idempotent producer's id), tried 1 + 2 times, down to the refused connection.
    expect(row!.last_error_message).toMatch(
      /^KafkaSendError: initProducerId failed 3 times: Cannot connect to any broker: Connection to 127\.0\.0\.1:\d+ failed: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
    );
  });
});

describe('relays that die, and relays that race', () => {
  it('a relay that claimed and died: after its lease the next relay takes the lane over; the dead one’s completion changes nothing', async () => {
    const [row] = await insertOutboxRows(sql, [{ aggregateId: 'D' }]);
    const dead = await claimOutbox(sql, { owner: 'relay:dead', limit: 10, runLength: 10, leaseSeconds: 0.2 });
    expect(dead.rows.map((r) => r.outbox_seq)).toEqual([row!.outbox_seq]);
    const producer = new CountingProducer();
    expect(await relay(sql, producer)).toMatchObject({ claimed: 0 });
    await new Promise((r) => setTimeout(r, 300));

    const result = await relay(sql, producer);
    const late = await completeOutbox(sql, 'relay:dead', [{ outboxSeq: row!.outbox_seq, outcome: 'published' }]);

    expect(result).toMatchObject({ claimed: 1, published: 1 });
    expect(late).toEqual([]);
    expect(producer.eventIdsOf('D')).toEqual([row!.event_id]);
    expect(await laneRows()).toEqual([]);
  });

  it('an event emitted while a relay holds its aggregate: the lane survives the release and the event goes out next', async () => {
    const [first] = await insertOutboxRows(sql, [{ aggregateId: 'E' }]);
    let second: { event_id: string } | undefined;
    const producer = new CountingProducer();
    const emittingMidPublish = {
      async publish(topic: string, messages: Parameters<CountingProducer['publish']>[1]) {
        if (second === undefined) [second] = await insertOutboxRows(sql, [{ aggregateId: 'E' }]);
        await producer.publish(topic, messages);
      },
    };

    const result = await relay(sql, emittingMidPublish);

    expect(result).toMatchObject({ claimed: 2, published: 2 });
    expect(producer.eventIdsOf('E')).toEqual([first!.event_id, second!.event_id]);
    expect(await laneRows()).toEqual([]);
  });

  it('two relays racing over many aggregates: every row published once, each aggregate in order, both relays at work', async () => {
    const specs = Array.from({ length: 120 }, (_, i) => ({ aggregateId: `R${i % 30}` }));
    const rows = await insertOutboxRows(sql, specs);
    const producer = new CountingProducer({ delayMs: 5 });
    // A relay publishes its claimed lanes side by side, so the gate counts relays, not sends:
    // every send waits until both relays have one pending, so the first relay cannot drain
    // everything before the second has connected and claimed lanes of its own.
    const sending = new Set<string>();
    let bothSending!: () => void;
    const gate = new Promise<void>((resolve) => (bothSending = resolve));
    const racing = (name: string) => ({
      async publish(topic: string, messages: Parameters<CountingProducer['publish']>[1]) {
        sending.add(name);
        if (sending.size === 2) bothSending();
        await gate;
        await producer.publish(topic, messages);
      },
    });
    const config = relayConfig({ batchSize: 8, runLength: 2 });
    const other = db.client({ max: 4 });

    const [a, b] = await Promise.all([relay(sql, racing('a'), { config }), relay(other, racing('b'), { config })]);

    expect(a.published + b.published).toBe(120);
    expect(a.published).toBeGreaterThan(0);
    expect(b.published).toBeGreaterThan(0);
    expect(a.lost + b.lost).toBe(0);
    const ids = producer.accepted.map((m) => m.eventId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toHaveLength(120);
    for (let i = 0; i < 30; i++) {
      expect(producer.eventIdsOf(`R${i}`)).toEqual(rows.filter((r) => r.aggregate_id === `R${i}`).map((r) => r.event_id));
    }
    expect((await outboxStates(sql)).every((s) => s.published)).toBe(true);
  });
});

describe('gauges and retention', () => {
  it('publishes depth and oldest unpublished age per emitting consumer', async () => {
    await insertOutboxRows(sql, [{ aggregateId: 'G' }, { aggregateId: 'G' }]);
    await sql`update integration.outbox set created_at = now() - interval '90 seconds'`;
    const metrics = new MetricsRecorder();

    await relay(sql, new CountingProducer({ refuse: () => true }), { metrics });

    expect(metrics.value('case-sla', MetricNames.OutboxDepth)).toBe(2);
    expect(metrics.value('case-sla', MetricNames.OutboxOldestUnpublishedAgeSeconds)).toBeGreaterThanOrEqual(90);
    expect(metrics.value('case-sla', MetricNames.OutboxPublishRefused)).toBe(1);
    expect(metrics.value('case-sla', MetricNames.OutboxEventsPublished)).toBe(0);
  });

  it('deletes published rows past the retention, keeps younger ones and never an unpublished one', async () => {
    const [old, young, pending] = await insertOutboxRows(sql, [{ aggregateId: 'P1' }, { aggregateId: 'P2' }, { aggregateId: 'P3' }]);
    await sql`update integration.outbox set published_at = now() - interval '8 days' where outbox_seq = ${old!.outbox_seq}`;
    await sql`update integration.outbox set published_at = now() - interval '6 days' where outbox_seq = ${young!.outbox_seq}`;
    await sql`update integration.outbox set created_at = now() - interval '30 days' where outbox_seq = ${pending!.outbox_seq}`;
    await sql`delete from integration.outbox_lane where aggregate_id in ('P1', 'P2')`;

    const result = await relay(sql, new CountingProducer({ refuse: () => true }));

    expect(result.purged).toBe(1);
    expect((await outboxStates(sql)).map((s) => s.aggregate_id)).toEqual(['P2', 'P3']);
  });
});
