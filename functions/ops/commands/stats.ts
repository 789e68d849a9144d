/** `stats`: per consumer, rows by status, the due backlog and its oldest age, unresolved poison. */
import { z } from 'zod';
import { listPauses } from '../../inbox/consumer-pause';
import type { ConsumerManifestEntry } from '../../framework/manifest';
import { effectivePayloadRetentionDays } from '../../inbox/purge';
import { heldAggregates, inboxStatusCounts, poisonCounts, receivedSince, type HeldAggregate } from '../queries/stats';
import type { InboxStatus } from '../../inbox/types';
import { caller, since, text } from '../args';
import { consumersOf, defineCommand, optionalConsumer } from '../command';
import { age, get, table } from '../format';
import { describePause, pauseView, type PauseView } from '../pause-targets';

const STATUSES: readonly InboxStatus[] = ['RECEIVED', 'PROCESSING', 'PROCESSED', 'RETRY_PENDING', 'QUARANTINED', 'IGNORED'];

export interface ConsumerStats {
  consumer: string;
  /** False for rows of a consumer no longer declared. */
  declared: boolean;
  statuses: Record<InboxStatus, number>;
  total: number;
  due: number;
  oldestDueAgeSeconds: number | null;
  quarantined: number;
  poisonUnresolved: number;
  oldestPoisonAgeSeconds: number | null;
  /** Its pauses (ops pause): by whom, why, since when; empty when it runs. */
  paused: PauseView[];
}

export interface ReceivedWindow {
  /** The window's start, by the database's clock. */
  since: Date;
  /** Rows received since then, per consumer and event type, most first. */
  rows: { consumer: string; eventType: string; received: number }[];
}

/** Who paused what, why and since when: a line per pause ('' when none). */
function pausedLines(consumers: readonly ConsumerStats[]): string {
  const lines = consumers.flatMap((c) => c.paused.map((p) => `  ${c.consumer}: ${describePause(p)}`));
  return lines.length === 0 ? '' : `\n\npaused (nothing of theirs is processed until ops resume):\n${lines.join('\n')}`;
}

/** How many held aggregates `stats` lists (the gauges count them all). */
const HELD_LISTED = 20;

/** The smallest payload retention of the consumers counted: no row received since then has left the inbox. */
function leftAfterDays(consumers: readonly ConsumerManifestEntry[]): number {
  return consumers.length === 0 ? 0 : Math.min(...consumers.map((c) => effectivePayloadRetentionDays(c.retention)));
}

export const stats = defineCommand({
  usage: `stats [--consumer C] [--since 1h|ISO]
      rows per consumer and status, due backlog and its oldest age, unresolved poison;
      and rows received per consumer and event type in the last hour (or since --since)`,
  schema: z.strictObject({ ...caller, consumer: text.optional(), since: since.optional() }),

  async run(deps, args): Promise<{ consumers: ConsumerStats[]; received: ReceivedWindow; held: HeldAggregate[] }> {
    const only = optionalConsumer(deps, args.consumer);
    const declared = new Set(consumersOf(deps).map((c) => c.name));
    const [counts, poison, recent, held, pauses] = await Promise.all([
      inboxStatusCounts(deps.sql, only),
      poisonCounts(deps.sql, only),
      receivedSince(
        deps.sql,
        only !== undefined ? [only] : [...declared],
        args.since ?? { seconds: 3600 },
        leftAfterDays(consumersOf(deps).filter((c) => only === undefined || c.name === only)),
      ),
      heldAggregates(deps.sql, only, HELD_LISTED),
      listPauses(deps.sql, only !== undefined ? [only] : undefined),
    ]);
    const names = new Set(only !== undefined ? [only] : [...declared]);
    for (const r of counts) names.add(r.consumer_name);
    for (const p of poison) names.add(p.consumer_name);

    const consumers = [...names].sort().map((name): ConsumerStats => {
      const statuses = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<InboxStatus, number>;
      let due = 0;
      let oldest: number | null = null;
      for (const r of counts.filter((c) => c.consumer_name === name)) {
        statuses[r.status] = r.count;
        due += r.due;
        if (r.oldest_due_age_seconds !== null) oldest = Math.max(oldest ?? 0, r.oldest_due_age_seconds);
      }
      const p = poison.find((x) => x.consumer_name === name);
      return {
        consumer: name,
        declared: declared.has(name),
        statuses,
        total: Object.values(statuses).reduce((a, b) => a + b, 0),
        due,
        oldestDueAgeSeconds: oldest,
        quarantined: statuses.QUARANTINED,
        poisonUnresolved: p?.unresolved ?? 0,
        oldestPoisonAgeSeconds: p?.oldest_unresolved_age_seconds ?? null,
        paused: pauses.filter((x) => x.consumer_name === name).map(pauseView),
      };
    });
    const received = {
      since: recent.start,
      rows: recent.counts.map((c) => ({ consumer: c.consumer_name, eventType: c.event_type, received: c.received })),
    };
    return { consumers, received, held: [...held] };
  },

  format: (r) =>
    table(r.consumers, [
      ['consumer', (c) => (c.declared ? c.consumer : `${String(c.consumer)} (undeclared)`)],
      ['received', (c) => c.statuses.RECEIVED],
      ['processing', (c) => c.statuses.PROCESSING],
      ['retry', (c) => c.statuses.RETRY_PENDING],
      ['quarantined', get('quarantined')],
      ['processed', (c) => c.statuses.PROCESSED],
      ['ignored', (c) => c.statuses.IGNORED],
      ['due', get('due')],
      ['oldest due', (c) => age(c.oldestDueAgeSeconds)],
      ['poison', get('poisonUnresolved')],
      ['oldest poison', (c) => age(c.oldestPoisonAgeSeconds)],
      ['paused', (c) => (c.paused.length === 0 ? '-' : c.paused.map((p) => p.target).join('+'))],
    ]) +
    pausedLines(r.consumers) +
    `\n\nreceived since ${r.received.since.toISOString()}:\n` +
    table(r.received.rows, [
      ['consumer', get('consumer')],
      ['event type', get('eventType')],
      ['received', get('received')],
    ]) +
    (r.held.length === 0
      ? ''
      : `\n\nheld by a quarantined row (hold-aggregate; replay or resolve it to release them), longest first:\n` +
        table(r.held, [
          ['consumer', get('consumer_name')],
          ['aggregate', (h) => `${h.aggregate_type}/${h.aggregate_id}`],
          ['held by event', get('event_id')],
          ['error', get('error_code')],
          ['rows behind', get('behind')],
        ])),
});
