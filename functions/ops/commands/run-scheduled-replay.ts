/**
 * `run-scheduled-replay --replay-id ID`: what the one-time schedules of schedule-replay
 * invoke. Runs the replay the database holds under that id, at most once; anything else
 * (an unknown id, a replay that already ran or is not yet due) is refused, audited, and
 * changes nothing (functions/ops/queries/scheduled-replay.ts).
 */
import { z } from 'zod';
import { runScheduledReplay } from '../queries/scheduled-replay';
import { traceOperatorAction } from '../action-spans';
import { defineCommand } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';
import { auditLine } from '../format';
import { candidateView } from '../selection';

const REFUSALS = {
  unknown: 'no scheduled replay has this id',
  'already-ran': 'this replay already ran',
  'not-yet-due': 'this replay is not due yet',
} as const;

export const runScheduledReplayCommand = defineCommand({
  usage: `run-scheduled-replay --replay-id ID
      run a replay recorded by schedule-replay, once (what its schedule invokes)`,
  schema: z.strictObject({ replayId: z.uuid({ message: 'must be a scheduled replay id (uuid)' }) }),

  changes: 'always',
  async run(deps, args, inv) {
    const outcome = await runScheduledReplay(deps.sql, {
      replayId: args.replayId,
      requestId: inv.requestId ?? null,
      refusedSource: inv.source,
    });
    if (!outcome.ran) {
      deps.logger?.error('ops_scheduled_replay_refused', { replayId: args.replayId, refused: outcome.reason, auditId: outcome.auditId });
      throw new OpsError(OpsErrorCodes.REPLAY_REFUSED, `replay ${args.replayId}: ${REFUSALS[outcome.reason]}; nothing was replayed`, {
        refused: outcome.reason,
        auditId: outcome.auditId,
        ...(outcome.replay?.ran_at ? { ranAt: outcome.replay.ran_at } : {}),
      });
    }
    traceOperatorAction('replay', outcome.rows, { auditId: outcome.auditId, actor: outcome.replay.actor });
    deps.logger?.info('ops_scheduled_replay', {
      replayId: args.replayId,
      actor: outcome.replay.actor,
      count: outcome.rows.length,
      auditId: outcome.auditId,
    });
    return { replayId: args.replayId, replayed: outcome.rows.length, rows: outcome.rows.map(candidateView), auditId: outcome.auditId };
  },

  format: (r) => [`replay ${r.replayId}: replayed ${r.replayed} row(s) to RETRY_PENDING`, auditLine(r.auditId)].join('\n'),
});
