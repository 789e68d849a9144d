/** `replay`: QUARANTINED → RETRY_PENDING due now, with a fresh attempt budget, audited. */
import { z } from 'zod';
import { replayQuarantined } from '../../inbox/replay';
import { caller, flag, reasonText } from '../args';
import { defineCommand } from '../command';
import { formatDone, formatDryRun } from '../format';
import {
  checkSelection,
  dryRunOn,
  runOn,
  SELECTION_DEFAULT_LIMIT,
  selectionFields,
  type candidateView,
  type Skipped,
} from '../selection';

/** The arguments of a replay; schedule-replay validates the input of the replay it schedules with it. */
export const replaySchema = z
  .strictObject({ ...caller, ...selectionFields, reason: reasonText.optional(), dryRun: flag })
  .superRefine(checkSelection);

type Rows = { rows: ReturnType<typeof candidateView>[]; skipped: Skipped; auditId: string };
type DryRun = Rows & { dryRun: true; matched: number; wouldReplay: number; limit: number };
type Done = Rows & { dryRun: false; replayed: number; remaining: number };

export const replay = defineCommand({
  usage: `replay (--id ID ... | --consumer C [--error-code E] [--event-type T] [--from ISO] [--to ISO])
         [--limit N] (--dry-run | --reason TEXT [--actor NAME])
      QUARANTINED → RETRY_PENDING due now, fresh attempt budget, at most --limit (${SELECTION_DEFAULT_LIMIT}) rows;
      --from/--to bound quarantined_at; recorded in the operator audit (ops audit), dry runs too`,
  schema: replaySchema,

  async run(deps, args, inv): Promise<DryRun | Done> {
    if (args.dryRun) {
      const preview = await dryRunOn(deps, 'replay', args, inv);
      return { dryRun: true, wouldReplay: preview.rows.length, limit: args.limit, ...preview };
    }
    const done = await runOn(deps, 'replay', args, inv, replayQuarantined);
    return { dryRun: false, replayed: done.rows.length, ...done };
  },

  format: (r) => (r.dryRun ? formatDryRun('replay', r) : formatDone(`replayed ${r.replayed} row(s) to RETRY_PENDING`, r)),
});
