/** `replay`: QUARANTINED → RETRY_PENDING due now, with a fresh attempt budget, audited. */
import { z } from 'zod';
import { recordOperatorAction } from '../../inbox/operator-audit';
import { countErrorCodes, countReplayable, previewReplay, replayQuarantined } from '../../inbox/replay';
import { caller, flag, reasonText } from '../args';
import { actorOf, defineCommand } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';
import { candidateColumns, skippedLines, table } from '../format';
import {
  candidateView,
  checkSelection,
  describeSelection,
  SELECTION_DEFAULT_LIMIT,
  selectionFields,
  selectionOf,
  skippedIds,
} from '../selection';

/** The arguments of a replay; schedule-replay validates the input of the replay it schedules with it. */
export const replaySchema = z
  .strictObject({ ...caller, ...selectionFields, reason: reasonText.optional(), dryRun: flag })
  .superRefine(checkSelection);

type DryRun = {
  dryRun: true;
  auditId: string;
  matched: number;
  wouldReplay: number;
  limit: number;
  rows: ReturnType<typeof candidateView>[];
  skipped: Awaited<ReturnType<typeof skippedIds>>;
};
type Done = {
  dryRun: false;
  replayed: number;
  remaining: number;
  auditId: string;
  rows: ReturnType<typeof candidateView>[];
  skipped: Awaited<ReturnType<typeof skippedIds>>;
};

export const replay = defineCommand({
  usage: `replay (--id ID ... | --consumer C [--error-code E] [--event-type T] [--from ISO] [--to ISO])
         [--limit N] (--dry-run | --reason TEXT [--actor NAME])
      QUARANTINED → RETRY_PENDING due now, fresh attempt budget, at most --limit (${SELECTION_DEFAULT_LIMIT}) rows;
      --from/--to bound quarantined_at; recorded in the operator audit (ops audit), dry runs too`,
  schema: replaySchema,

  async run(deps, args, inv): Promise<DryRun | Done> {
    const selection = selectionOf(deps, args);
    if (args.dryRun) {
      const [matched, rows] = await Promise.all([
        countReplayable(deps.sql, selection),
        previewReplay(deps.sql, selection, args.limit),
      ]);
      const skipped = await skippedIds(deps, selection, rows);
      if (matched === 0) {
        throw new OpsError(OpsErrorCodes.NO_ROWS_MATCH, `no QUARANTINED rows match ${describeSelection(selection)}`, { skipped });
      }
      // A dry run changes no row, so its trail needs no transaction with anything.
      const audit = await recordOperatorAction(deps.sql, {
        action: 'replay',
        actor: args.actor ?? inv.defaultActor ?? null,
        reason: args.reason ?? null,
        source: args.source ?? inv.source,
        dryRun: true,
        consumerNames: rows.map((r) => r.consumer_name),
        request: { selection, limit: args.limit },
        affectedCount: rows.length,
        inboxIds: rows.map((r) => r.inbox_id),
        outcome: { matched, priorErrorCodes: countErrorCodes(rows) },
      });
      return {
        dryRun: true,
        auditId: audit.audit_id,
        matched,
        wouldReplay: rows.length,
        limit: args.limit,
        rows: rows.map(candidateView),
        skipped,
      };
    }

    // Checked before the actor so that the most useful message comes first.
    if (args.reason === undefined) {
      throw new OpsError(OpsErrorCodes.REASON_REQUIRED, 'a replay needs a reason (it is recorded in the audit trail); or use dry-run');
    }
    const actor = actorOf(args, inv);
    const source = args.source ?? inv.source;
    const result = await replayQuarantined(deps.sql, { selection, limit: args.limit, actor, reason: args.reason, source });
    const skipped = await skippedIds(deps, selection, result.replayed);
    if (result.audit === null) {
      throw new OpsError(OpsErrorCodes.NO_ROWS_MATCH, `no QUARANTINED rows match ${describeSelection(selection)}`, { skipped });
    }
    // Only a filter can leave more behind; ids beyond the limit are refused by the schema.
    const remaining = 'inboxIds' in selection ? 0 : await countReplayable(deps.sql, selection);
    deps.logger?.info('ops_replay', {
      auditId: result.audit.audit_id,
      actor,
      source,
      consumers: result.audit.consumer_names,
      replayed: result.replayed.length,
      remaining,
    });
    return {
      dryRun: false,
      replayed: result.replayed.length,
      remaining,
      auditId: result.audit.audit_id,
      rows: result.replayed.map(candidateView),
      skipped,
    };
  },

  format: (r) => {
    if (r.dryRun) {
      return (
        `dry run: would replay ${r.wouldReplay} of ${r.matched} matching QUARANTINED row(s) (limit ${r.limit}); nothing changed\n` +
        table(r.rows, candidateColumns) +
        skippedLines(r.skipped)
      );
    }
    return (
      `replayed ${r.replayed} row(s) to RETRY_PENDING (audit ${r.auditId})` +
      (r.remaining > 0 ? `; ${r.remaining} more still match: run again` : '') +
      '\n' +
      table(r.rows, candidateColumns) +
      skippedLines(r.skipped)
    );
  },
});
