/** `replay`: QUARANTINED → RETRY_PENDING due now, with a fresh attempt budget, audited. */
import { replayQuarantined } from '../queries/replay';
import { defineCommand } from '../command';
import { formatDone, formatDryRun } from '../format';
import { actionSchema, dryRunOn, runOn, SELECTION_DEFAULT_LIMIT, type DoneResult, type DryRunResult } from '../selection';

export const replay = defineCommand({
  usage: `replay (--id ID ... | --consumer C [--error-code E] [--event-type T] [--from ISO] [--to ISO])
         [--limit N] (--dry-run | --reason TEXT [--actor NAME])
      QUARANTINED → RETRY_PENDING due now, fresh attempt budget, at most --limit (${SELECTION_DEFAULT_LIMIT}) rows;
      --from/--to bound quarantined_at; recorded in the operator audit (ops audit), dry runs too`,
  schema: actionSchema,

  changes: 'dry-run-flag',
  async run(deps, args, inv): Promise<DryRunResult<'wouldReplay'> | DoneResult<'replayed'>> {
    if (args.dryRun) {
      const preview = await dryRunOn(deps, 'replay', args, inv);
      return { dryRun: true, wouldReplay: preview.rows.length, limit: args.limit, ...preview };
    }
    const done = await runOn(deps, 'replay', args, inv, replayQuarantined);
    return { dryRun: false, replayed: done.rows.length, ...done };
  },

  format: (r) => (r.dryRun ? formatDryRun('replay', r) : formatDone(`replayed ${r.replayed} row(s) to RETRY_PENDING`, r)),
});
