/** `resolve`: QUARANTINED → IGNORED without running it (OPERATOR_RESOLVED), audited. */
import { z } from 'zod';
import { resolveQuarantined } from '../../inbox/resolve';
import { caller, flag, reasonText } from '../args';
import { defineCommand } from '../command';
import { formatDone, formatDryRun } from '../format';
import { checkSelection, dryRunOn, runOn, selectionFields, type candidateView, type Skipped } from '../selection';

type Rows = { rows: ReturnType<typeof candidateView>[]; skipped: Skipped; auditId: string };
type DryRun = Rows & { dryRun: true; matched: number; wouldResolve: number; limit: number };
type Done = Rows & { dryRun: false; resolved: number; remaining: number };

export const resolve = defineCommand({
  usage: `resolve (--id ID ... | --consumer C [--error-code E] [--event-type T] [--from ISO] [--to ISO])
         [--limit N] (--dry-run | --reason TEXT [--actor NAME])
      QUARANTINED → IGNORED without running it (error code OPERATOR_RESOLVED); same selection as replay; audited`,
  schema: z
    .strictObject({ ...caller, ...selectionFields, reason: reasonText.optional(), dryRun: flag })
    .superRefine(checkSelection),

  async run(deps, args, inv): Promise<DryRun | Done> {
    if (args.dryRun) {
      const preview = await dryRunOn(deps, 'resolve', args, inv);
      return { dryRun: true, wouldResolve: preview.rows.length, limit: args.limit, ...preview };
    }
    const done = await runOn(deps, 'resolve', args, inv, resolveQuarantined);
    return { dryRun: false, resolved: done.rows.length, ...done };
  },

  format: (r) => (r.dryRun ? formatDryRun('resolve', r) : formatDone(`resolved ${r.resolved} row(s) as IGNORED, OPERATOR_RESOLVED`, r)),
});
