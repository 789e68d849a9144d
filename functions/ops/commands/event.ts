/**
 * `event`: one event's whole story — "what happened to event X?". By consumer and event
 * id (the case inbox design's findByConsumerAndEventId) or by the Kafka record's topic, partition and
 * offset; across every declared consumer when none is named (two consumers read one
 * topic, each with its own row). No payload unless asked for.
 */
import { z } from 'zod';
import {
  findConsumedEvents,
  findEventPoison,
  findEventRows,
  type ConsumedEventRow,
  type EventPoisonRow,
  type EventRow,
} from '../../inbox/find-event';
import { listPauses, type PauseRow } from '../../inbox/consumer-pause';
import { actionsOnInboxRows, type ActionOnRows } from '../../inbox/operator-audit';
import { caller, flag, text } from '../args';
import { consumersOf, defineCommand, optionalConsumer } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';
import { cell, fields, get, table } from '../format';
import { describePause, pauseView, type PauseView } from '../pause-targets';

const position = z.coerce.number().int().min(0);

export interface TimelineEntry {
  at: Date;
  what: string;
}

export interface EventStory {
  consumer: string;
  inboxId: string;
  eventId: string;
  eventType: string;
  eventVersion: number;
  status: EventRow['status'];
  attempts: number;
  kafka: { topic: string; partition: number; offset: number; key: string | null; keyEncoding: string; partitionKey: string | null };
  trace: { producer: string; correlationId: string | null; causationId: string | null; tenantId: string | null };
  times: {
    occurredAt: Date;
    receivedAt: Date;
    lockedAt: Date | null;
    nextAttemptAt: Date | null;
    processedAt: Date | null;
    quarantinedAt: Date | null;
    payloadPurgedAt: Date | null;
    updatedAt: Date;
  };
  /** Present while the row is in flight (PROCESSING). */
  lease: { owner: string | null; lockedAt: Date | null; expiresAt: Date | null; expired: boolean | null } | null;
  error: { code: string | null; message: string | null; detail: unknown } | null;
  aggregate: {
    type: string;
    id: string;
    version: number | null;
    /** Its first open row, in the order the worker claims them; null when nothing of it is open. */
    head: { inboxId: string; eventId: string; status: string; version: number | null } | null;
    isHead: boolean;
    openAhead: number;
    openBehind: number;
    quarantinedOthers: number;
  };
  /** Operator actions that changed this row (replay, resolve, reingest). */
  actions: Omit<ActionOnRows, 'touched'>[];
  /** The consumer's pauses now (ops pause): a paused consumer's row waits for the resume. */
  consumerPaused: PauseView[];
  /** The poison rows of the same record (listed in the result's `poison`). */
  poisonIds: string[];
  /** Every recorded moment, oldest first. */
  timeline: TimelineEntry[];
  payload?: unknown;
  headers?: unknown;
}

const ACTION_WORDS: Record<string, string> = { replay: 'replayed', resolve: 'resolved', reingest: 're-ingested from poison' };

/**
 * An event whose row left the inbox at its payload retention: what its kept key says
 * (integration.consumed_events). Payload, attempts and aggregate are gone with the row.
 */
export interface LeftEventStory {
  consumer: string;
  inboxId: string;
  eventId: string;
  eventType: string;
  status: ConsumedEventRow['status'];
  kafka: { topic: string; partition: number; offset: number };
  times: { receivedAt: Date; processedAt: Date; quarantinedAt: Date | null };
  errorCode: string | null;
  /** A redelivery is a duplicate until then. */
  dedupeUntil: Date;
  actions: Omit<ActionOnRows, 'touched'>[];
  poisonIds: string[];
  timeline: TimelineEntry[];
}

function leftStoryOf(key: ConsumedEventRow, allActions: readonly ActionOnRows[], allPoison: readonly EventPoisonRow[]): LeftEventStory {
  const actions = allActions.filter((a) => a.touched.includes(key.inbox_id));
  const poison = allPoison.filter(
    (p) =>
      p.resolved_inbox_id === key.inbox_id ||
      (p.consumer_name === key.consumer_name &&
        p.topic_name === key.topic_name &&
        p.partition_no === key.partition_no &&
        p.offset_no === key.offset_no),
  );
  const timeline: (TimelineEntry | null)[] = [
    ...poison.map((p) => ({ at: p.created_at, what: `poisoned: ${p.error_code ?? '?'} (poison ${p.poison_id})` })),
    { at: key.received_at, what: `received by ${key.consumer_name}` },
    key.quarantined_at !== null ? { at: key.quarantined_at, what: 'quarantined' } : null,
    ...actions.map((a) => ({
      at: a.created_at,
      what: `${ACTION_WORDS[a.action] ?? a.action} by ${a.actor ?? '?'}${a.reason !== null ? `: ${a.reason}` : ''} (audit ${a.audit_id})`,
    })),
    { at: key.processed_at, what: key.status === 'IGNORED' ? 'ignored' : 'processed' },
    { at: key.dedupe_until, what: 'dedupe window ends: a redelivery is new after this' },
  ];
  return {
    consumer: key.consumer_name,
    inboxId: key.inbox_id,
    eventId: key.event_id,
    eventType: key.event_type,
    status: key.status,
    kafka: { topic: key.topic_name, partition: key.partition_no, offset: key.offset_no },
    times: { receivedAt: key.received_at, processedAt: key.processed_at, quarantinedAt: key.quarantined_at },
    errorCode: key.error_code,
    dedupeUntil: key.dedupe_until,
    actions: actions.map(({ touched: _, ...a }) => a),
    poisonIds: poison.map((p) => p.poison_id),
    timeline: timeline.filter((e): e is TimelineEntry => e !== null).sort((a, b) => a.at.getTime() - b.at.getTime()),
  };
}

/** A poison row is part of a row's story when it became that row, or was stored for the same consumer and offset. */
function belongsTo(p: EventPoisonRow, row: EventRow): boolean {
  return (
    p.resolved_inbox_id === row.inbox_id ||
    (p.consumer_name === row.consumer_name &&
      p.topic_name === row.topic_name &&
      p.partition_no === row.partition_no &&
      p.offset_no === row.offset_no)
  );
}

function timelineOf(row: EventRow, actions: readonly ActionOnRows[], poison: readonly EventPoisonRow[]): TimelineEntry[] {
  const entries: (TimelineEntry | null)[] = [
    { at: row.occurred_at, what: `occurred (${row.producer}'s clock)` },
    ...poison.map((p) => ({ at: p.created_at, what: `poisoned: ${p.error_code ?? '?'} (poison ${p.poison_id})` })),
    { at: row.received_at, what: `received by ${row.consumer_name}` },
    row.status === 'PROCESSING' && row.locked_at !== null
      ? { at: row.locked_at, what: `claimed by ${row.locked_by ?? '?'} (attempt ${row.attempt_count})` }
      : null,
    row.quarantined_at !== null ? { at: row.quarantined_at, what: `quarantined: ${row.error_code ?? '?'}` } : null,
    ...actions.map((a) => ({
      at: a.created_at,
      what: `${ACTION_WORDS[a.action] ?? a.action} by ${a.actor ?? '?'}${a.reason !== null ? `: ${a.reason}` : ''} (audit ${a.audit_id})`,
    })),
    row.processed_at !== null ? { at: row.processed_at, what: row.status === 'IGNORED' ? 'ignored' : 'processed' } : null,
    row.payload_purged_at !== null ? { at: row.payload_purged_at, what: 'payload purged (retention)' } : null,
    row.status === 'RETRY_PENDING' && row.next_attempt_at !== null
      ? { at: row.next_attempt_at, what: `next attempt due (${row.error_code ?? 'retry'})` }
      : null,
    row.status === 'PROCESSING' && row.lease_expires_at !== null
      ? { at: row.lease_expires_at, what: row.lease_expired ? 'lease expired (the reaper returns it)' : 'lease expires' }
      : null,
  ];
  return entries.filter((e): e is TimelineEntry => e !== null).sort((a, b) => a.at.getTime() - b.at.getTime());
}

function storyOf(
  row: EventRow,
  allActions: readonly ActionOnRows[],
  allPoison: readonly EventPoisonRow[],
  pauses: readonly PauseRow[],
): EventStory {
  const actions = allActions.filter((a) => a.touched.includes(row.inbox_id));
  const poison = allPoison.filter((p) => belongsTo(p, row));
  return {
    consumer: row.consumer_name,
    inboxId: row.inbox_id,
    eventId: row.event_id,
    eventType: row.event_type,
    eventVersion: row.event_version,
    status: row.status,
    attempts: row.attempt_count,
    kafka: {
      topic: row.topic_name,
      partition: row.partition_no,
      offset: row.offset_no,
      key: row.record_key,
      keyEncoding: row.record_key_encoding,
      partitionKey: row.partition_key,
    },
    trace: { producer: row.producer, correlationId: row.correlation_id, causationId: row.causation_id, tenantId: row.tenant_id },
    times: {
      occurredAt: row.occurred_at,
      receivedAt: row.received_at,
      lockedAt: row.locked_at,
      nextAttemptAt: row.next_attempt_at,
      processedAt: row.processed_at,
      quarantinedAt: row.quarantined_at,
      payloadPurgedAt: row.payload_purged_at,
      updatedAt: row.updated_at,
    },
    lease:
      row.status === 'PROCESSING'
        ? { owner: row.locked_by, lockedAt: row.locked_at, expiresAt: row.lease_expires_at, expired: row.lease_expired }
        : null,
    error:
      row.error_code === null && row.error_message === null
        ? null
        : { code: row.error_code, message: row.error_message, detail: row.error_detail },
    aggregate: {
      type: row.aggregate_type,
      id: row.aggregate_id,
      version: row.aggregate_version,
      head:
        row.head_inbox_id === null
          ? null
          : { inboxId: row.head_inbox_id, eventId: row.head_event_id!, status: row.head_status!, version: row.head_aggregate_version },
      isHead: row.head_inbox_id === row.inbox_id,
      openAhead: row.open_ahead,
      openBehind: row.open_behind,
      quarantinedOthers: row.quarantined_in_aggregate,
    },
    actions: actions.map(({ touched: _, ...a }) => a),
    consumerPaused: pauses.filter((p) => p.consumer_name === row.consumer_name).map(pauseView),
    poisonIds: poison.map((p) => p.poison_id),
    timeline: timelineOf(row, actions, poison),
    ...('payload' in row ? { payload: row.payload, headers: row.headers } : {}),
  };
}

export const event = defineCommand({
  usage: `event (--event-id E | --topic T --partition P --offset O) [--consumer C] [--include-payload]
      one event's story: status, attempts, each recorded moment, last error, lease owner, its place in its
      aggregate (head, rows ahead and behind), operator actions on it, the poison row of its offset;
      every declared consumer unless --consumer`,
  schema: z
    .strictObject({
      ...caller,
      consumer: text.optional(),
      eventId: text.optional(),
      topic: text.optional(),
      partition: position.optional(),
      offset: position.optional(),
      includePayload: flag,
    })
    .superRefine((v, ctx) => {
      const offset = [v.topic, v.partition, v.offset].filter((x) => x !== undefined).length;
      if (v.eventId !== undefined && offset > 0) {
        ctx.addIssue({ code: 'custom', path: ['eventId'], message: 'find by event id or by topic, partition and offset, not both' });
      } else if (v.eventId === undefined && offset < 3) {
        ctx.addIssue({ code: 'custom', path: ['eventId'], message: 'give an event id, or a topic, a partition and an offset' });
      }
    }),

  async run(deps, args) {
    const only = optionalConsumer(deps, args.consumer);
    const consumerNames = only !== undefined ? [only] : consumersOf(deps).map((c) => c.name);
    const lookup =
      args.eventId !== undefined
        ? { consumerNames, eventId: args.eventId }
        : { consumerNames, topic: args.topic!, partition: args.partition!, offset: args.offset! };
    const [rows, left] = await Promise.all([
      findEventRows(deps.sql, lookup, args.includePayload),
      args.eventId !== undefined ? findConsumedEvents(deps.sql, consumerNames, args.eventId) : Promise.resolve([]),
    ]);
    const positions =
      'eventId' in lookup
        ? [...rows, ...left].map((r) => ({
            consumerName: r.consumer_name,
            topic: r.topic_name,
            partition: r.partition_no,
            offset: r.offset_no,
          }))
        : consumerNames.map((consumerName) => ({ consumerName, topic: lookup.topic, partition: lookup.partition, offset: lookup.offset }));
    const ids = [...rows, ...left].map((r) => r.inbox_id);
    const [poison, actions, pauses] = await Promise.all([
      findEventPoison(deps.sql, positions, ids),
      actionsOnInboxRows(deps.sql, ids),
      listPauses(deps.sql, [...new Set(rows.map((r) => r.consumer_name))]),
    ]);
    if (rows.length === 0 && left.length === 0 && poison.length === 0) {
      const what =
        'eventId' in lookup
          ? `event ${lookup.eventId}: no inbox row, no kept key (its dedupe window may have ended) and no poison row`
          : `${lookup.topic}/${lookup.partition}@${lookup.offset}: no inbox row and no poison row (a row that left the inbox at its payload retention is found by --event-id)`;
      throw new OpsError(OpsErrorCodes.NOT_FOUND, `${what} (consumers: ${consumerNames.join(', ')})`);
    }
    return {
      lookup: { ...lookup, consumerNames },
      events: rows.map((r) => storyOf(r, actions, poison, pauses)),
      /** Events whose row left the inbox at its payload retention, their key still kept. */
      left: left.map((k) => leftStoryOf(k, actions, poison)),
      poison,
    };
  },

  format: (r) => {
    const sections = r.events.map((e) =>
      [
        `== ${e.consumer}: ${e.eventType}@${e.eventVersion} event ${e.eventId}`,
        fields([
          ['inbox id', e.inboxId],
          ['status', e.status],
          ['attempts', e.attempts],
          ['kafka', `${e.kafka.topic}/${e.kafka.partition}@${e.kafka.offset}${e.kafka.key !== null ? ` key ${e.kafka.key}` : ''}`],
          ['correlation id', e.trace.correlationId],
          ['consumer', e.consumerPaused.length === 0 ? 'not paused' : e.consumerPaused.map(describePause).join('; ')],
          ['error', e.error === null ? null : `${cell(e.error.code)}: ${cell(e.error.message)}`],
          [
            'lease',
            e.lease === null ? null : `${cell(e.lease.owner)} until ${cell(e.lease.expiresAt)}${e.lease.expired ? ' (expired)' : ''}`,
          ],
          [
            'aggregate',
            `${e.aggregate.type}/${e.aggregate.id}${e.aggregate.version !== null ? `@${e.aggregate.version}` : ''}: ` +
              (e.aggregate.head === null
                ? 'nothing open'
                : e.aggregate.isHead
                  ? `this row is its head; ${e.aggregate.openBehind} open behind it`
                  : `head ${e.aggregate.head.eventId} (${e.aggregate.head.status}${e.aggregate.head.version !== null ? `, v${e.aggregate.head.version}` : ''}); ` +
                    `${e.aggregate.openAhead} open ahead of this row, ${e.aggregate.openBehind} behind`) +
              (e.aggregate.quarantinedOthers > 0 ? `; ${e.aggregate.quarantinedOthers} other row(s) QUARANTINED` : ''),
          ],
        ]),
        'timeline:',
        table(e.timeline, [
          ['at', get('at')],
          ['what', get('what')],
        ]),
        ...('payload' in e ? ['payload:', cell(e.payload), 'headers:', cell(e.headers)] : []),
      ].join('\n'),
    );
    for (const e of r.left) {
      sections.push(
        [
          `== ${e.consumer}: ${e.eventType} event ${e.eventId} (left the inbox at its payload retention; payload gone)`,
          fields([
            ['inbox id', e.inboxId],
            ['status', e.status],
            ['kafka', `${e.kafka.topic}/${e.kafka.partition}@${e.kafka.offset}`],
            ['error code', e.errorCode],
            ['key kept until', e.dedupeUntil],
          ]),
          'timeline:',
          table(e.timeline, [
            ['at', get('at')],
            ['what', get('what')],
          ]),
        ].join('\n'),
      );
    }
    const unclaimed = r.poison.filter(
      (p) => !r.events.some((e) => e.poisonIds.includes(p.poison_id)) && !r.left.some((e) => e.poisonIds.includes(p.poison_id)),
    );
    if (unclaimed.length > 0) {
      sections.push(
        `== poison rows at ${unclaimed[0]!.topic_name}/${unclaimed[0]!.partition_no}@${unclaimed[0]!.offset_no} (\`poison show <id>\` for the raw value)\n` +
          table(unclaimed, [
            ['poison id', get('poison_id')],
            ['consumer', get('consumer_name')],
            ['error code', get('error_code')],
            ['error', get('error_message')],
            ['created at', get('created_at')],
            ['resolved', (p) => (p.resolved_at === null ? '-' : `${cell(p.resolved_at)} by ${cell(p.resolved_by)}`)],
          ]),
      );
    }
    return sections.join('\n\n');
  },
});
