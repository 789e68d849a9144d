/**
 * Selecting QUARANTINED rows, for the commands that act on them (replay, schedule-replay,
 * resolve): by inbox ids, or by a consumer narrowed by filters; bounded by a limit. The
 * argument schema and its translation into the inbox's selection live together here.
 */
import { z } from 'zod';
import { inboxStatuses, type ReplayCandidate, type ReplaySelection } from '../inbox/replay';
import { count, datetime, inboxId, text } from './args';
import { knownConsumer, type OpsDeps } from './command';

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

export function selectionOf(deps: OpsDeps, args: SelectionShape): ReplaySelection {
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
export async function skippedIds(deps: OpsDeps, selection: ReplaySelection, taken: readonly ReplayCandidate[]) {
  if (!('inboxIds' in selection)) return [];
  const takenIds = new Set(taken.map((r) => r.inbox_id));
  const rest = selection.inboxIds.filter((id) => !takenIds.has(id));
  if (rest.length === 0) return [];
  const found = new Map((await inboxStatuses(deps.sql, rest)).map((r) => [r.inbox_id, r.status]));
  return rest.map((id) => ({ inboxId: id, reason: found.has(id) ? `status is ${found.get(id)}, not QUARANTINED` : 'no such inbox row' }));
}

export function candidateView(r: ReplayCandidate) {
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

export function describeSelection(selection: ReplaySelection): string {
  return 'inboxIds' in selection ? `${selection.inboxIds.length} inbox id(s)` : `filter ${JSON.stringify(selection)}`;
}
