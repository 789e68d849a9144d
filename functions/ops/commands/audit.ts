/** `audit`: the operator actions, newest first: who, when, why, what, how many, dry run or not. */
import { z } from 'zod';
import { listOperatorActions, OPERATOR_ACTIONS } from '../queries/operator-audit';
import { caller, page, since, text } from '../args';
import { defineCommand, optionalConsumer } from '../command';
import { decodeCursor, pageOf } from '../cursor';
import { get, nextPage, table } from '../format';

export const audit = defineCommand({
  usage: `audit [--consumer C] [--action ${OPERATOR_ACTIONS.join('|')}] [--since 24h|ISO] [--limit N] [--cursor X]
      every operator action, newest first: who, when, why, what, how many, dry run or not`,
  schema: z.strictObject({
    ...caller,
    consumer: text.optional(),
    action: z.enum(OPERATOR_ACTIONS).optional(),
    since: since.optional(),
    ...page,
  }),

  async run(deps, args) {
    return pageOf(
      await listOperatorActions(deps.sql, {
        consumerName: optionalConsumer(deps, args.consumer),
        action: args.action,
        since: args.since,
        after: decodeCursor(args.cursor),
        limit: args.limit,
      }),
    );
  },

  format: (r) =>
    table(r.rows, [
      ['at', get('created_at')],
      ['action', (x) => (x.dry_run ? `${x.action} (dry run)` : x.action)],
      ['actor', get('actor')],
      // Who the database says wrote it (migrations/0203): the login role, not the name given.
      ['as role', (x) => x.session_role ?? ''],
      ['source', get('source')],
      ['consumers', (x) => x.consumer_names.join(', ')],
      ['count', get('affected_count')],
      ['reason', get('reason')],
      ['audit id', get('audit_id')],
    ]) + nextPage(r.nextCursor),
});
