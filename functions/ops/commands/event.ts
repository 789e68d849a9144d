/**
 * `event`: one event's whole story — "what happened to event X?". By consumer and event
 * id (the case inbox design's findByConsumerAndEventId) or by the Kafka record's topic, partition and
 * offset; across every declared consumer when none is named (two consumers read one
 * topic, each with its own row). No payload unless asked for.
 */
import { z } from 'zod';
import { findConsumedEvents, findEventPoison, findEventRows } from '../queries/find-event';
import { listPauses } from '../../inbox/consumer-pause';
import { actionsOnInboxRows } from '../queries/operator-audit';
import { caller, flag, text } from '../args';
import { consumersOf, defineCommand, optionalConsumer } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';
import { cell, fields, get, table } from '../format';
import { describePause } from '../pause-targets';
import { leftStoryOf, storyOf } from '../event-story';

const position = z.coerce.number().int().min(0);

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
          ['trace id', e.trace.traceId],
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
