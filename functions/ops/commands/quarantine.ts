/** `quarantine`: the case inbox design's summary of QUARANTINED rows. */
import { z } from 'zod';
import { quarantineSummary } from '../queries/quarantine';
import { caller, text } from '../args';
import { defineCommand, optionalConsumer } from '../command';
import { get, table } from '../format';

export const quarantine = defineCommand({
  usage: `quarantine [--consumer C]
      QUARANTINED rows grouped by consumer, event type and error code`,
  schema: z.strictObject({ ...caller, consumer: text.optional() }),

  async run(deps, args) {
    return { summary: await quarantineSummary(deps.sql, optionalConsumer(deps, args.consumer)) };
  },

  format: (r) =>
    table(r.summary, [
      ['consumer', get('consumer_name')],
      ['event type', get('event_type')],
      ['error code', get('error_code')],
      ['total', get('total')],
      ['first seen', get('first_seen')],
      ['last seen', get('last_seen')],
    ]),
});
