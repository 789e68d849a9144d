/** `quarantine list`: QUARANTINED rows, newest first, keyset-paged; no payloads unless asked. */
import { z } from 'zod';
import { listQuarantined } from '../queries/quarantine';
import { caller, flag, page, PAGE_DEFAULT, text } from '../args';
import { defineCommand, optionalConsumer } from '../command';
import { decodeCursor, pageOf } from '../cursor';
import { get, nextPage, table } from '../format';

export const quarantineList = defineCommand({
  usage: `quarantine list [--consumer C] [--error-code E] [--event-type T] [--limit N] [--cursor X] [--include-payload]
      QUARANTINED rows, newest first, ${PAGE_DEFAULT} a page (no payloads unless --include-payload)`,
  schema: z.strictObject({
    ...caller,
    consumer: text.optional(),
    errorCode: text.optional(),
    eventType: text.optional(),
    ...page,
    includePayload: flag,
  }),

  async run(deps, args) {
    return pageOf(
      await listQuarantined(deps.sql, {
        consumerName: optionalConsumer(deps, args.consumer),
        errorCode: args.errorCode,
        eventType: args.eventType,
        after: decodeCursor(args.cursor),
        limit: args.limit,
        includePayload: args.includePayload,
      }),
    );
  },

  format: (r) =>
    table(r.rows, [
      ['inbox id', get('inbox_id')],
      ['consumer', get('consumer_name')],
      ['event type', get('event_type')],
      ['aggregate', (x) => `${String(x.aggregate_type)}/${String(x.aggregate_id)}`],
      ['attempts', get('attempt_count')],
      ['error code', get('error_code')],
      ['error', get('error_message')],
      ['quarantined at', get('quarantined_at')],
    ]) + nextPage(r.nextCursor),
});
