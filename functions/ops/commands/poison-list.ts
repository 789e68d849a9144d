/** `poison list`: raw poison rows, newest first, unresolved only by default, without raw values. */
import { z } from 'zod';
import { listPoison } from '../queries/poison';
import { caller, flag, page, text } from '../args';
import { defineCommand, optionalConsumer } from '../command';
import { decodeCursor, pageOf } from '../cursor';
import { cell, get, nextPage, table } from '../format';

export const poisonList = defineCommand({
  usage: `poison list [--consumer C] [--include-resolved] [--limit N] [--cursor X]`,
  schema: z.strictObject({ ...caller, consumer: text.optional(), includeResolved: flag, ...page }),

  async run(deps, args) {
    return pageOf(
      await listPoison(deps.sql, {
        consumerName: optionalConsumer(deps, args.consumer),
        includeResolved: args.includeResolved,
        after: decodeCursor(args.cursor),
        limit: args.limit,
      }),
    );
  },

  format: (r) =>
    table(r.rows, [
      ['poison id', get('poison_id')],
      ['consumer', get('consumer_name')],
      ['topic/partition@offset', (x) => `${String(x.topic_name)}/${String(x.partition_no)}@${String(x.offset_no)}`],
      ['error code', get('error_code')],
      ['error', get('error_message')],
      ['size', get('raw_length')],
      ['created at', get('created_at')],
      ['resolved', (x) => (x.resolved_at === null ? '-' : `${cell(x.resolved_at)} by ${cell(x.resolved_by)}`)],
    ]) + nextPage(r.nextCursor),
});
