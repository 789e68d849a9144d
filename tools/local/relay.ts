/**
 * The outbox relay in the local run: the real runRelay on an accelerated schedule, one
 * per emitting consumer, each connected as that consumer's relay role (as each relay
 * function is deployed), publishing to simulated topics instead of MSK, with what production throws at it —
 * refused sends and relays that die — and the checks at the end: every obligation event
 * published exactly once, the outbox drained.
 *
 *   SimulatedTopics   an OutboxProducer: per topic, partitions chosen by the key's hash,
 *                     an append-only log per partition. A refused send writes nothing, as a
 *                     broker that did not acknowledge (the client rejects the send).
 *   crashes           'before-publish': a relay claims lanes under a short lease and dies;
 *                     the next claim after the lease takes them over. 'after-ack': a relay
 *                     dies after the broker acknowledged its send, before it recorded it;
 *                     its rows are published again after the lease, under the same event
 *                     ids (at least once on the wire, once per event id downstream).
 *
 * Self-contained: run.ts starts it, waits for it to settle and adds its checks.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { ConsumerDeclaration } from '../../functions/framework/types';
import { SLA_OBLIGATION_OPENED, SLA_OBLIGATIONS_TOPIC } from '../../functions/consumers/case-sla';
import type { Config } from '../../functions/lib/config';
import type { Sql } from '../../functions/lib/db';
import { claimOutbox } from '../../functions/outbox/claim-outbox';
import type { OutboxMessage, OutboxProducer } from '../../functions/relay/producer';
import { newRelayOwnerId, runRelay } from '../../functions/relay/run-relay';
import type { CheckResult } from './checks';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { SinkLogger } from './observability';
import { hash32, keyedChance } from './random';

const PARTITIONS = 3;
/** A crashed relay's lease: short, so the takeover happens within the run. */
const CRASH_LEASE_SECONDS = 1;

export interface TopicRecord extends OutboxMessage {
  topic: string;
  partition: number;
  offset: number;
}

export class SimulatedTopics implements OutboxProducer {
  readonly partitions = new Map<string, TopicRecord[][]>();
  sends = 0;
  refused = 0;

  /** refuseRate: the share of sends the broker refuses, decided by the seed and the send's number. */
  constructor(private readonly options: { seed: number; refuseRate: number }) {}

  async publish(topic: string, messages: readonly OutboxMessage[]): Promise<void> {
    const n = this.sends++;
    if (keyedChance(this.options.refuseRate, this.options.seed, 'refuse', n)) {
      this.refused += 1;
      throw new Error('simulated broker: NOT_ENOUGH_REPLICAS');
    }
    this.append(topic, messages);
  }

  append(topic: string, messages: readonly OutboxMessage[]): void {
    let log = this.partitions.get(topic);
    if (log === undefined) this.partitions.set(topic, (log = Array.from({ length: PARTITIONS }, () => [])));
    for (const m of messages) {
      const partition = hash32(m.key) % PARTITIONS;
      log[partition]!.push({ ...m, topic, partition, offset: log[partition]!.length });
    }
  }

  records(topic: string): TopicRecord[] {
    return (this.partitions.get(topic) ?? []).flat();
  }
}

/** One emitting consumer's relay: its declaration and a connection as its relay role. */
export interface ConsumerRelay {
  consumer: ConsumerDeclaration;
  sql: Sql;
}

export interface LocalRelayOptions {
  /** A relay per emitting consumer; the planned crashes are the first one's. */
  relays: readonly ConsumerRelay[];
  config: Config;
  logger: SinkLogger;
  metrics: Metrics;
  topics: SimulatedTopics;
  tickMs: number;
  invocationMs: number;
  /** Crashes to simulate, alternating before-publish and after-ack. */
  crashes: number;
  isStopping: () => boolean;
}

export interface LocalRelay {
  run(): Promise<void>;
  /** Nothing is left unpublished (call once the inbox is final). */
  settled(): Promise<boolean>;
  stats: {
    invocations: number;
    published: number;
    refused: number;
    crashes: { kind: 'before-publish' | 'after-ack'; rows: number }[];
    /** Planned crashes that found nothing to abandon (nothing was emitted). */
    crashesNotSimulated: number;
  };
}

export function localRelay(o: LocalRelayOptions): LocalRelay {
  const stats: LocalRelay['stats'] = { invocations: 0, published: 0, refused: 0, crashes: [], crashesNotSimulated: 0 };
  const plan: ('before-publish' | 'after-ack')[] = Array.from({ length: o.crashes }, (_, i) =>
    i % 2 === 0 ? 'before-publish' : 'after-ack',
  );
  const relayConfig = { relay: { ...o.config.relay, backoffSeconds: [0.1, 0.2, 0.5] } };

  return {
    stats,
    async run() {
      while (!o.isStopping()) {
        // A planned crash goes first; until it has happened the relay holds back, so the crash
        // always finds rows to abandon however fast the machine drains the outbox.
        const next = plan[0];
        if (next !== undefined) {
          if (!(await crash(o, relayConfig, stats, next))) {
            await sleep(o.tickMs);
            continue;
          }
          plan.shift();
        }
        await invoke(o, relayConfig, stats);
        await sleep(o.tickMs);
      }
    },
    async settled() {
      // Each relay's role sees its own consumer's rows: together, the whole outbox.
      for (const { sql } of o.relays) {
        const [row] = await sql<{ n: number }[]>`select count(*)::int as n from integration.outbox where published_at is null`;
        if (row!.n > 0) return false;
      }
      // Called once the inbox is final: nothing more will be emitted, so a crash still
      // planned has nothing to abandon. The summary says so.
      stats.crashesNotSimulated += plan.splice(0).length;
      return true;
    },
  };
}

/** The relay's configuration in the local run: the stage's, with short back-offs. */
type RelayConfig = { relay: Config['relay'] };

/** One planned crash of the first relay, if there is something to abandon; true when it happened. */
async function crash(
  o: LocalRelayOptions,
  relayConfig: RelayConfig,
  stats: LocalRelay['stats'],
  kind: 'before-publish' | 'after-ack',
): Promise<boolean> {
  const first = o.relays[0];
  if (first === undefined) return true;
  if (kind === 'before-publish') {
    const claim = await claimOutbox(first.sql, {
      owner: newRelayOwnerId('local-crashed-relay'),
      consumerName: first.consumer.name,
      limit: 5,
      runLength: 5,
      leaseSeconds: CRASH_LEASE_SECONDS,
    });
    if (claim.rows.length > 0) stats.crashes.push({ kind, rows: claim.rows.length });
    return claim.rows.length > 0;
  }
  // The broker takes the send; then the process is gone: the run never resolves.
  let abandoned = 0;
  const dying: OutboxProducer = {
    publish(topic, messages) {
      o.topics.append(topic, messages);
      abandoned += messages.length;
      return new Promise<void>(() => {});
    },
  };
  void runRelay({
    sql: first.sql,
    producer: dying,
    consumer: first.consumer,
    config: { relay: { ...relayConfig.relay, batchSize: 5, leaseSeconds: CRASH_LEASE_SECONDS } },
    logger: o.logger,
    metrics: o.metrics,
    owner: newRelayOwnerId('local-crashed-relay'),
    remainingMs: () => 60_000,
  });
  await sleep(o.tickMs);
  if (abandoned > 0) stats.crashes.push({ kind, rows: abandoned });
  return abandoned > 0;
}

/** One invocation of each consumer's relay, side by side, as their schedules would start them; a failure is logged and the next tick tries again. */
async function invoke(o: LocalRelayOptions, relayConfig: RelayConfig, stats: LocalRelay['stats']): Promise<void> {
  const ends = performance.now() + o.invocationMs;
  await Promise.all(
    o.relays.map(async ({ consumer, sql }) => {
      try {
        const r = await runRelay({
          sql,
          producer: o.topics,
          consumer,
          config: relayConfig,
          logger: o.logger,
          metrics: o.metrics,
          owner: newRelayOwnerId('local-relay'),
          remainingMs: () => (o.isStopping() ? 0 : Math.max(0, ends - performance.now())),
        });
        stats.invocations += 1;
        stats.published += r.published;
        stats.refused += r.refused;
      } catch (error) {
        // A failed invocation: the next tick tries again, as the schedule would.
        o.logger.error('relay invocation failed', {
          consumerName: consumer.name,
          error: error instanceof Error ? error.message : String(error),
        });
      }
    }),
  );
}

/** The outbox checks: what the topics hold against the obligations the run opened. */
export async function relayChecks(sql: Sql, topics: SimulatedTopics, stats: LocalRelay['stats']): Promise<CheckResult[]> {
  const obligations = await sql<{ case_id: string; source_event_id: string; due_at: Date }[]>`
    select case_id, source_event_id, due_at from case_core.sla_obligation order by case_id`;
  const outbox = await sql<{ event_id: string; source_event_id: string; published: boolean }[]>`
    select event_id::text, source_event_id, published_at is not null as published
    from integration.outbox where event_type = ${SLA_OBLIGATION_OPENED}`;
  const records = topics.records(SLA_OBLIGATIONS_TOPIC);
  const byEventId = new Map<string, TopicRecord[]>();
  for (const r of records) {
    const id = r.headers.eventId!;
    const copies = byEventId.get(id);
    if (copies === undefined) byEventId.set(id, [r]);
    else copies.push(r);
  }
  const eventOf = new Map(outbox.map((o) => [o.source_event_id, o.event_id]));
  const reSendable = stats.crashes.filter((c) => c.kind === 'after-ack').reduce((n, c) => n + c.rows, 0);

  const problems: string[] = [];
  let resent = 0;
  for (const ob of obligations) {
    const eventId = eventOf.get(ob.source_event_id);
    if (eventId === undefined) {
      problems.push(`${ob.case_id}: no outbox event`);
      continue;
    }
    const copies = byEventId.get(eventId) ?? [];
    byEventId.delete(eventId);
    if (copies.length === 0) {
      problems.push(`${ob.case_id}: event ${eventId} never published`);
      continue;
    }
    const envelope = JSON.parse(copies[0]!.value) as {
      aggregateId: string;
      causationId: string;
      payload: { caseId: string; dueAt: string };
    };
    if (
      envelope.aggregateId !== ob.case_id ||
      envelope.causationId !== ob.source_event_id ||
      envelope.payload.dueAt !== ob.due_at.toISOString()
    ) {
      problems.push(`${ob.case_id}: published ${JSON.stringify(envelope.payload)}, not its obligation`);
    }
    if (copies.some((c) => c.value !== copies[0]!.value || c.key !== ob.case_id))
      problems.push(`${ob.case_id}: copies of ${eventId} differ`);
    resent += copies.length - 1;
  }
  for (const extra of byEventId.keys()) problems.push(`${extra}: published, but no obligation has it`);
  // Copies only where a relay died between the broker's ack and its mark, at most one each.
  if (resent > reSendable) problems.push(`${resent} copies re-sent, but only ${reSendable} rows were abandoned after an ack`);

  const unpublished = outbox.filter((o) => !o.published).length;
  const [lanes] = await sql<{ n: number }[]>`select count(*)::int as n from integration.outbox_lane`;
  const crashes = stats.crashes;
  return [
    problems.length === 0
      ? {
          name: 'every obligation event published exactly once',
          ok: true,
          detail:
            `${obligations.length} obligations, one event id each, published; ${stats.refused} refused sends retried; ` +
            `${crashes.length} relay crashes taken over (${resent} identical copies re-sent after a crash between ack and mark)` +
            (stats.crashesNotSimulated > 0 ? `; ${stats.crashesNotSimulated} planned crashes found nothing to abandon` : ''),
        }
      : {
          name: 'every obligation event published exactly once',
          ok: false,
          detail: problems.slice(0, 3).join(', ') + (problems.length > 3 ? `, … (${problems.length} in all)` : ''),
        },
    unpublished === 0 && lanes!.n === 0
      ? { name: 'outbox drained', ok: true, detail: `${outbox.length} rows published, no lane left` }
      : { name: 'outbox drained', ok: false, detail: `${unpublished} rows unpublished, ${lanes!.n} lanes left` },
  ];
}
