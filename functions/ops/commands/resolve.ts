/** `resolve`: QUARANTINED → IGNORED without running it (OPERATOR_RESOLVED), audited. */
import { resolveQuarantined } from '../queries/resolve';
import { defineCommand } from '../command';
import { formatDone, formatDryRun } from '../format';
import { actionSchema, dryRunOn, runOn, type DoneResult, type DryRunResult } from '../selection';

export const resolve = defineCommand({
  usage: `resolve (--id ID ... | --consumer C [--error-code E] [--event-type T] [--from ISO] [--to ISO])
         [--limit N] (--dry-run | --reason TEXT [--actor NAME])
      QUARANTINED → IGNORED without running it (error code OPERATOR_RESOLVED); same selection as replay; audited`,
  schema: actionSchema,

  changes: 'dry-run-flag',
  async run(deps, args, inv): Promise<DryRunResult<'wouldResolve'> | DoneResult<'resolved'>> {
    if (args.dryRun) {
      const preview = await dryRunOn(deps, 'resolve', args, inv);
      return { dryRun: true, wouldResolve: preview.rows.length, limit: args.limit, ...preview };
    }
    const done = await runOn(deps, 'resolve', args, inv, resolveQuarantined);
    return { dryRun: false, resolved: done.rows.length, ...done };
  },

  format: (r) => (r.dryRun ? formatDryRun('resolve', r) : formatDone(`resolved ${r.resolved} row(s) as IGNORED, OPERATOR_RESOLVED`, r)),
});
