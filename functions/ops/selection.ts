/**
 * Selecting QUARANTINED rows, for the commands that act on them (replay, schedule-replay,
 * resolve): by inbox ids, or by a consumer narrowed by filters; bounded by a limit. The
 * argument schema, its translation into the inbox's selection, and the dry run and real
 * run that replay and resolve share live together here.
 */
import { z } from 'zod';
import { recordOperatorAction } from './queries/operator-audit';
import {
  countErrorCodes,
  countQuarantined,
  inboxStatuses,
  previewQuarantined,
  type QuarantineActionRequest,
  type QuarantineActionResult,
  type QuarantinedCandidate,
  type QuarantineSelection,
} from './queries/quarantine-action';
import type { Sql } from '../lib/db';
import { caller, count, datetime, flag, inboxId, reasonText, text } from './args';
import { actorOf, knownConsumer, type Invocation, type OpsDeps } from './command';
import { traceOperatorAction } from './action-spans';
import { OpsError, OpsErrorCodes } from './errors';

export const SELECTION_DEFAULT_LIMIT = 1000;
export const SELECTION_MAX_LIMIT = 10_000;

export const selectionFields = {
  ids: z.array(inboxId).min(1).max(SELECTION_MAX_LIMIT).optional(),
  consumer: text.optional(),
  errorCode: text.optional(),
  eventType: text.optional(),
  /** quarantined_at >= from */
  from: datetime.optional(),
  /** quarantined_at < to */
  to: datetime.optional(),
  limit: count(SELECTION_DEFAULT_LIMIT, SELECTION_MAX_LIMIT),
};

type SelectionShape = {
  ids?: string[] | undefined;
  limit: number;
  consumer?: string | undefined;
  errorCode?: string | undefined;
  eventType?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
};

/** Exactly one way of selecting: ids, or a consumer with optional filters. */
export function checkSelection(v: SelectionShape, ctx: z.core.$RefinementCtx): void {
  const filters = [v.errorCode, v.eventType, v.from, v.to].some((f) => f !== undefined);
  if (v.ids !== undefined && (v.consumer !== undefined || filters)) {
    ctx.addIssue({ code: 'custom', path: ['ids'], message: 'select by ids or by consumer and filters, not both' });
  }
  // Ids beyond the limit would be left QUARANTINED and reported as skipped for no reason
  // the operator could see: refuse them instead.
  const distinctIds = v.ids === undefined ? 0 : new Set(v.ids.map((id) => id.toLowerCase())).size;
  if (distinctIds > v.limit) {
    ctx.addIssue({ code: 'custom', path: ['ids'], message: `${distinctIds} ids but limit is ${v.limit}: raise limit or name fewer ids` });
  }
  if (v.ids === undefined && v.consumer === undefined) {
    ctx.addIssue({ code: 'custom', path: ['consumer'], message: 'required unless ids are given' });
  }
  if (v.from !== undefined && v.to !== undefined && Date.parse(v.from) >= Date.parse(v.to)) {
    ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be after from' });
  }
}

export function selectionOf(deps: OpsDeps, args: SelectionShape): QuarantineSelection {
  if (args.ids !== undefined) return { inboxIds: [...new Set(args.ids.map((id) => id.toLowerCase()))] };
  return {
    consumerName: knownConsumer(deps, args.consumer!).name,
    ...(args.errorCode !== undefined ? { errorCode: args.errorCode } : {}),
    ...(args.eventType !== undefined ? { eventType: args.eventType } : {}),
    ...(args.from !== undefined ? { quarantinedFrom: args.from } : {}),
    ...(args.to !== undefined ? { quarantinedTo: args.to } : {}),
  };
}

/** Ids the operator named that the command does not take, and why. */
export async function skippedIds(deps: OpsDeps, selection: QuarantineSelection, taken: readonly QuarantinedCandidate[]) {
  if (!('inboxIds' in selection)) return [];
  const takenIds = new Set(taken.map((r) => r.inbox_id));
  const rest = selection.inboxIds.filter((id) => !takenIds.has(id));
  if (rest.length === 0) return [];
  const found = new Map((await inboxStatuses(deps.sql, rest)).map((r) => [r.inbox_id, r.status]));
  return rest.map((id) => ({ inboxId: id, reason: found.has(id) ? `status is ${found.get(id)}, not QUARANTINED` : 'no such inbox row' }));
}

export function candidateView(r: QuarantinedCandidate) {
  return {
    inboxId: r.inbox_id,
    consumer: r.consumer_name,
    eventId: r.event_id,
    eventType: r.event_type,
    aggregate: `${r.aggregate_type}/${r.aggregate_id}${r.aggregate_version !== null ? `@${r.aggregate_version}` : ''}`,
    errorCode: r.error_code,
    attempts: r.attempt_count,
    quarantinedAt: r.quarantined_at,
  };
}

export function describeSelection(selection: QuarantineSelection): string {
  return 'inboxIds' in selection ? `${selection.inboxIds.length} inbox id(s)` : `filter ${JSON.stringify(selection)}`;
}

/** The arguments of a replay or a resolve (schedule-replay checks the replay it schedules with it). */
export const actionSchema = z
  .strictObject({ ...caller, ...selectionFields, reason: reasonText.optional(), dryRun: flag })
  .superRefine(checkSelection);

type ActionRows = { rows: ReturnType<typeof candidateView>[]; skipped: Skipped; auditId: string };
/** A dry run's result; `would` names its count field (wouldReplay, wouldResolve). */
export type DryRunResult<Would extends string> = ActionRows & { dryRun: true; matched: number; limit: number } & Record<Would, number>;
/** A real run's result; `done` names its count field (replayed, resolved). */
export type DoneResult<Done extends string> = ActionRows & { dryRun: false; remaining: number } & Record<Done, number>;

type ActionArgs = SelectionShape & {
  actor?: string | undefined;
  reason?: string | undefined;
};

export type Skipped = Awaited<ReturnType<typeof skippedIds>>;

/**
 * What a replay or resolve would take, recorded as a dry run (it changes no row, so its
 * trail needs no transaction with anything). Nothing matching is NO_ROWS_MATCH.
 */
export async function dryRunOn(deps: OpsDeps, action: 'replay' | 'resolve', args: ActionArgs, inv: Invocation) {
  const selection = selectionOf(deps, args);
  const [matched, rows] = await Promise.all([countQuarantined(deps.sql, selection), previewQuarantined(deps.sql, selection, args.limit)]);
  const skipped = await skippedIds(deps, selection, rows);
  if (matched === 0) {
    throw new OpsError(OpsErrorCodes.NO_ROWS_MATCH, `no QUARANTINED rows match ${describeSelection(selection)}`, { skipped });
  }
  const audit = await recordOperatorAction(deps.sql, {
    action,
    actor: args.actor ?? inv.defaultActor ?? null,
    reason: args.reason ?? null,
    source: inv.source,
    requestId: inv.requestId ?? null,
    dryRun: true,
    consumerNames: rows.map((r) => r.consumer_name),
    request: { selection, limit: args.limit },
    affectedCount: rows.length,
    inboxIds: rows.map((r) => r.inbox_id),
    outcome: { matched, priorErrorCodes: countErrorCodes(rows) },
  });
  return { auditId: audit.audit_id, matched, rows: rows.map(candidateView), skipped };
}

/**
 * Run a replay or resolve for real: a reason and an actor are required; `move` changes the
 * rows and writes the audit row in one transaction (functions/ops/queries/quarantine-action.ts).
 */
export async function runOn(
  deps: OpsDeps,
  action: 'replay' | 'resolve',
  args: ActionArgs,
  inv: Invocation,
  move: (sql: Sql, request: QuarantineActionRequest) => Promise<QuarantineActionResult>,
) {
  const selection = selectionOf(deps, args);
  // Checked before the actor so that the most useful message comes first.
  if (args.reason === undefined) {
    throw new OpsError(OpsErrorCodes.REASON_REQUIRED, `a ${action} needs a reason (it is recorded in the audit trail); or use dry-run`);
  }
  const actor = actorOf(args, inv);
  const source = inv.source;
  const result = await move(deps.sql, {
    selection,
    limit: args.limit,
    actor,
    reason: args.reason,
    source,
    requestId: inv.requestId ?? null,
  });
  const skipped = await skippedIds(deps, selection, result.rows);
  if (result.audit === null) {
    throw new OpsError(OpsErrorCodes.NO_ROWS_MATCH, `no QUARANTINED rows match ${describeSelection(selection)}`, { skipped });
  }
  traceOperatorAction(action, result.rows, { auditId: result.audit.audit_id, actor });
  // Only a filter can leave more behind; ids beyond the limit are refused by the schema.
  const remaining = 'inboxIds' in selection ? 0 : await countQuarantined(deps.sql, selection);
  deps.logger?.info(`ops_${action}`, {
    auditId: result.audit.audit_id,
    actor,
    source,
    consumers: result.audit.consumer_names,
    count: result.rows.length,
    remaining,
  });
  return { auditId: result.audit.audit_id, rows: result.rows.map(candidateView), remaining, skipped };
}
