/**
 * Operator replay: QUARANTINED → RETRY_PENDING, due now (seed 000's statement), audited.
 *
 * Why the attempt count is reset to 0: a row quarantined with MAX_ATTEMPTS_EXCEEDED has
 * used its whole budget, so without a reset the worker would quarantine it again after a
 * single failure. An operator replays after fixing the cause; the row deserves the full
 * backoff schedule. The attempts it had used stay visible in the audit row's
 * prior_error_codes and in the logs of the earlier attempts.
 *
 * Why ordering is safe: a replayed row re-enters the normal claim path (RETRY_PENDING,
 * due now). The worker serializes the rows of one aggregate and applies versioned events
 * in aggregate_version order, so replaying several rows of one aggregate at once, or a
 * row whose successors were already applied, goes through the same guards as a first
 * delivery. Candidates are taken oldest-received first so that a --limit cut keeps the
 * earlier events of an aggregate ahead of the later ones.
 */
import type { Queryable, Sql } from '../lib/db';
import { recordOperatorAction, type ActionSource, type OperatorAuditRow } from './operator-audit';

/** Rows selected by inbox id, or by consumer plus optional narrowing filters. */
export type ReplaySelection =
  | { inboxIds: string[] }
  | {
      consumerName: string;
      errorCode?: string | undefined;
      eventType?: string | undefined;
      /** ISO-8601 datetimes bounding quarantined_at: from inclusive, to exclusive. */
      quarantinedFrom?: string | undefined;
      quarantinedTo?: string | undefined;
    };


/** A row a replay selects (no payload: operators see identities, not data). */
export interface ReplayCandidate {
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
}

function selectionFilter(q: Queryable, s: ReplaySelection) {
  if ('inboxIds' in s) return q`i.inbox_id = any(${s.inboxIds}::uuid[])`;
  return q`i.consumer_name = ${s.consumerName}
    ${s.errorCode !== undefined ? q`and i.error_code = ${s.errorCode}` : q``}
    ${s.eventType !== undefined ? q`and i.event_type = ${s.eventType}` : q``}
    ${s.quarantinedFrom !== undefined ? q`and i.quarantined_at >= ${s.quarantinedFrom}::text::timestamptz` : q``}
    ${s.quarantinedTo !== undefined ? q`and i.quarantined_at < ${s.quarantinedTo}::text::timestamptz` : q``}`;
}

/** How many QUARANTINED rows the selection matches (no limit). */
export async function countReplayable(q: Queryable, selection: ReplaySelection): Promise<number> {
  const [row] = await q<{ n: number }[]>`
    select count(*)::int as n
    from integration.consumer_inbox i
    where i.status = 'QUARANTINED' and ${selectionFilter(q, selection)}`;
  return row!.n;
}

/** The rows a replay with this selection and limit would move, in the order it takes them. Changes nothing. */
export async function previewReplay(q: Queryable, selection: ReplaySelection, limit: number): Promise<ReplayCandidate[]> {
  return q<ReplayCandidate[]>`
    select i.inbox_id, i.consumer_name, i.event_id, i.event_type, i.aggregate_type, i.aggregate_id,
           i.aggregate_version, i.error_code, i.attempt_count, i.quarantined_at
    from integration.consumer_inbox i
    where i.status = 'QUARANTINED' and ${selectionFilter(q, selection)}
    order by i.received_at, i.inbox_id
    limit ${limit}`;
}

/** The current status of each given id that exists (to explain ids a replay skips). */
export async function inboxStatuses(
  q: Queryable,
  inboxIds: readonly string[],
): Promise<{ inbox_id: string; consumer_name: string; status: string }[]> {
  return q<{ inbox_id: string; consumer_name: string; status: string }[]>`
    select inbox_id, consumer_name, status
    from integration.consumer_inbox
    where inbox_id = any(${inboxIds as string[]}::uuid[])`;
}

export interface ReplayRequest {
  selection: ReplaySelection;
  limit: number;
  actor: string;
  reason: string;
  source: ActionSource;
}

export interface ReplayResult {
  replayed: ReplayCandidate[];
  /** Null when nothing matched: then nothing changed and nothing was recorded. */
  audit: OperatorAuditRow | null;
}

/**
 * Move up to `limit` selected QUARANTINED rows to RETRY_PENDING due now and record the
 * audit row, in one transaction: a replay and its trail commit together or not at all.
 */
export async function replayQuarantined(sql: Sql, request: ReplayRequest): Promise<ReplayResult> {
  return sql.begin(async (tx) => {
    // RETURNING may read the FROM list: the candidate's error code and attempts are the
    // values before this statement cleared them.
    const replayed = await tx<ReplayCandidate[]>`
      with candidate as (
        select i.inbox_id, i.error_code, i.attempt_count, i.quarantined_at
        from integration.consumer_inbox i
        where i.status = 'QUARANTINED' and ${selectionFilter(tx, request.selection)}
        order by i.received_at, i.inbox_id
        limit ${request.limit}
        for update
      )
      update integration.consumer_inbox i
      set status = 'RETRY_PENDING',
          next_attempt_at = now(),
          attempt_count = 0,
          quarantined_at = null,
          error_code = null,
          error_message = null,
          error_detail = null,
          locked_by = null,
          locked_at = null,
          lease_expires_at = null,
          updated_at = now()
      from candidate c
      where i.inbox_id = c.inbox_id
        and i.status = 'QUARANTINED'
      returning i.inbox_id, i.consumer_name, i.event_id, i.event_type, i.aggregate_type, i.aggregate_id,
                i.aggregate_version, c.error_code, c.attempt_count, c.quarantined_at`;
    if (replayed.length === 0) return { replayed: [], audit: null };

    const audit = await recordOperatorAction(tx, {
      action: 'replay',
      actor: request.actor,
      reason: request.reason,
      source: request.source,
      dryRun: false,
      consumerNames: replayed.map((r) => r.consumer_name),
      request: { selection: request.selection, limit: request.limit },
      affectedCount: replayed.length,
      inboxIds: replayed.map((r) => r.inbox_id),
      outcome: { priorErrorCodes: countErrorCodes(replayed) },
    });
    return { replayed: [...replayed], audit };
  });
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
