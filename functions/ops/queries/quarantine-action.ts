/**
 * An operator action that moves QUARANTINED rows (replay, resolve): the selection — by
 * inbox id, or by consumer plus optional narrowing filters — counted, previewed, or taken
 * and moved together with the action's audit row, in one transaction. Candidates are taken
 * oldest-received first, so that a limit cut keeps an aggregate's earlier events ahead of
 * its later ones.
 */
import type { TraceCarrier } from '../../lib/tracing';
import type { Queryable, Sql, TransactionSql } from '../../lib/db';
import { recordOperatorAction, type ActionSource, type OperatorAuditRow } from './operator-audit';

/** Rows selected by inbox id, or by consumer plus optional narrowing filters. */
export type QuarantineSelection =
  | { inboxIds: string[] }
  | {
      consumerName: string;
      errorCode?: string | undefined;
      eventType?: string | undefined;
      /** ISO-8601 datetimes bounding quarantined_at: from inclusive, to exclusive. */
      quarantinedFrom?: string | undefined;
      quarantinedTo?: string | undefined;
    };

/** A row an action selects (no payload: operators see identities, not data). */
export interface QuarantinedCandidate {
  inbox_id: string;
  consumer_name: string;
  event_id: string;
  event_type: string;
  aggregate_type: string;
  aggregate_id: string;
  aggregate_version: number | null;
  error_code: string | null;
  attempt_count: number;
  quarantined_at: Date | null;
  /** Its producer's W3C trace context (migration 0172): where an operator's action on it is traced. */
  trace_context: TraceCarrier | null;
}

function selectionFilter(q: Queryable, s: QuarantineSelection) {
  if ('inboxIds' in s) return q`i.inbox_id = any(${s.inboxIds}::uuid[])`;
  return q`i.consumer_name = ${s.consumerName}
    ${s.errorCode !== undefined ? q`and i.error_code = ${s.errorCode}` : q``}
    ${s.eventType !== undefined ? q`and i.event_type = ${s.eventType}` : q``}
    ${s.quarantinedFrom !== undefined ? q`and i.quarantined_at >= ${s.quarantinedFrom}::text::timestamptz` : q``}
    ${s.quarantinedTo !== undefined ? q`and i.quarantined_at < ${s.quarantinedTo}::text::timestamptz` : q``}`;
}

/** How many QUARANTINED rows the selection matches (no limit). */
export async function countQuarantined(q: Queryable, selection: QuarantineSelection): Promise<number> {
  const [row] = await q<{ n: number }[]>`
    select count(*)::int as n
    from integration.consumer_inbox i
    where i.status = 'QUARANTINED' and ${selectionFilter(q, selection)}`;
  return row!.n;
}

/** The rows an action with this selection and limit would move, in the order it takes them. Changes nothing. */
export async function previewQuarantined(q: Queryable, selection: QuarantineSelection, limit: number): Promise<QuarantinedCandidate[]> {
  return q<QuarantinedCandidate[]>`
    select i.inbox_id, i.consumer_name, i.event_id, i.event_type, i.aggregate_type, i.aggregate_id,
           i.aggregate_version, i.error_code, i.attempt_count, i.quarantined_at, i.trace_context
    from integration.consumer_inbox i
    where i.status = 'QUARANTINED' and ${selectionFilter(q, selection)}
    order by i.received_at, i.inbox_id
    limit ${limit}`;
}

export interface QuarantineActionRequest {
  selection: QuarantineSelection;
  limit: number;
  actor: string;
  reason: string;
  source: ActionSource;
  /** The Lambda request that ran the action (null from the CLI). */
  requestId?: string | null;
  /** The scheduled replay this is (ops run-scheduled-replay), for the audit's request. */
  scheduledReplayId?: string;
}

export interface QuarantineActionResult {
  rows: QuarantinedCandidate[];
  /** Null when nothing matched: then nothing changed and nothing was recorded. */
  audit: OperatorAuditRow | null;
}

/**
 * Move up to `limit` selected QUARANTINED rows with `set` (the action's SET list; it reads
 * the row as it was) and record the audit row, in one transaction: the change and its
 * trail commit together or not at all. The rows come back with the error code, attempts
 * and quarantine time they had before.
 */
export async function moveQuarantined(
  sql: Sql,
  action: 'replay' | 'resolve',
  request: QuarantineActionRequest,
  set: (tx: TransactionSql) => ReturnType<TransactionSql>,
): Promise<QuarantineActionResult> {
  return sql.begin((tx) => moveQuarantinedIn(tx, action, request, set));
}

/** moveQuarantined in the caller's transaction (a scheduled replay marks itself ran in it too). */
export async function moveQuarantinedIn(
  tx: TransactionSql,
  action: 'replay' | 'resolve',
  request: QuarantineActionRequest,
  set: (tx: TransactionSql) => ReturnType<TransactionSql>,
): Promise<QuarantineActionResult> {
  // RETURNING may read the FROM list: the candidate's values are those before the update.
  const rows = await tx<QuarantinedCandidate[]>`
    with candidate as (
      select i.inbox_id, i.error_code, i.attempt_count, i.quarantined_at
      from integration.consumer_inbox i
      where i.status = 'QUARANTINED' and ${selectionFilter(tx, request.selection)}
      order by i.received_at, i.inbox_id
      limit ${request.limit}
      for update
    )
    update integration.consumer_inbox i
    set ${set(tx)},
        locked_by = null,
        locked_at = null,
        lease_expires_at = null,
        updated_at = now()
    from candidate c
    where i.inbox_id = c.inbox_id
      and i.status = 'QUARANTINED'
    returning i.inbox_id, i.consumer_name, i.event_id, i.event_type, i.aggregate_type, i.aggregate_id,
              i.aggregate_version, c.error_code, c.attempt_count, c.quarantined_at, i.trace_context`;
  if (rows.length === 0) return { rows: [], audit: null };

  const audit = await recordOperatorAction(tx, {
    action,
    actor: request.actor,
    reason: request.reason,
    source: request.source,
    requestId: request.requestId ?? null,
    dryRun: false,
    consumerNames: rows.map((r) => r.consumer_name),
    request: {
      selection: request.selection,
      limit: request.limit,
      ...(request.scheduledReplayId !== undefined ? { scheduledReplayId: request.scheduledReplayId } : {}),
    },
    affectedCount: rows.length,
    inboxIds: rows.map((r) => r.inbox_id),
    outcome: { priorErrorCodes: countErrorCodes(rows) },
  });
  return { rows: [...rows], audit };
}

/** The current status of each given id that exists (to explain ids an action skips). */
export async function inboxStatuses(
  q: Queryable,
  inboxIds: readonly string[],
): Promise<{ inbox_id: string; consumer_name: string; status: string }[]> {
  return q<{ inbox_id: string; consumer_name: string; status: string }[]>`
    select inbox_id, consumer_name, status
    from integration.consumer_inbox
    where inbox_id = any(${inboxIds as string[]}::uuid[])`;
}

/** How many of the rows carried each error code (before an action cleared it). */
export function countErrorCodes(rows: readonly { error_code: string | null }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of rows) {
    const code = r.error_code ?? '(none)';
    counts[code] = (counts[code] ?? 0) + 1;
  }
  return counts;
}
