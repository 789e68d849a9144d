/**
 * The quarantine, for operators: the case inbox design's summary and a keyset-paged list of rows.
 *
 * Rows never carry the payload unless asked for: what an operator needs to decide on a
 * replay is the identity of the event and why it was quarantined.
 */
import type { Queryable } from '../../lib/db';
import type { InboxRow } from '../../inbox/types';

export interface QuarantineSummaryRow {
  consumer_name: string;
  event_type: string;
  error_code: string | null;
  total: number;
  first_seen: Date;
  last_seen: Date;
}

/** The case inbox design's summary: grouped by consumer, event type and error code, largest first. */
export async function quarantineSummary(q: Queryable, consumerName?: string): Promise<QuarantineSummaryRow[]> {
  return q<QuarantineSummaryRow[]>`
    select consumer_name,
           event_type,
           error_code,
           count(*)::int as total,
           min(quarantined_at) as first_seen,
           max(quarantined_at) as last_seen
    from integration.consumer_inbox
    where status = 'QUARANTINED'
      ${consumerName !== undefined ? q`and consumer_name = ${consumerName}` : q``}
    group by consumer_name, event_type, error_code
    order by total desc, consumer_name, event_type, error_code nulls first`;
}

export type QuarantinedRow = Pick<
  InboxRow,
  | 'inbox_id'
  | 'consumer_name'
  | 'event_id'
  | 'event_type'
  | 'event_version'
  | 'aggregate_type'
  | 'aggregate_id'
  | 'aggregate_version'
  | 'topic_name'
  | 'partition_no'
  | 'offset_no'
  | 'correlation_id'
  | 'attempt_count'
  | 'error_code'
  | 'received_at'
> & {
  error_message: string | null;
  error_detail: unknown;
  quarantined_at: Date;
  /** Present only when includePayload was asked for. */
  payload?: unknown;
};

/**
 * A position in the list: the last row's quarantined_at as UTC text with microseconds, and
 * its id. Text on purpose: a JavaScript Date (and postgres.js's timestamptz parameter
 * serializer) keeps milliseconds only, and a truncated cursor skips rows.
 */
export interface QuarantineCursor {
  at: string;
  id: string;
}

export interface QuarantineListOptions {
  consumerName?: string | undefined;
  errorCode?: string | undefined;
  eventType?: string | undefined;
  /** Continue after this position (newest first). */
  after?: QuarantineCursor | undefined;
  limit: number;
  includePayload?: boolean | undefined;
}

export interface QuarantinePage {
  rows: QuarantinedRow[];
  /** Where the next page starts; null on the last page. */
  next: QuarantineCursor | null;
}

/**
 * QUARANTINED rows, newest first, by keyset (quarantined_at, inbox_id): a page costs the
 * same however deep it is, and rows quarantined meanwhile do not shift later pages.
 */
export async function listQuarantined(q: Queryable, options: QuarantineListOptions): Promise<QuarantinePage> {
  const rows = await q<(QuarantinedRow & { sort_at: string })[]>`
    select inbox_id, consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id,
           aggregate_version, topic_name, partition_no, offset_no, correlation_id, attempt_count,
           error_code, error_message, error_detail, received_at, quarantined_at,
           ${options.includePayload === true ? q`payload,` : q``}
           to_char(quarantined_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as sort_at
    from integration.consumer_inbox
    where status = 'QUARANTINED'
      ${options.consumerName !== undefined ? q`and consumer_name = ${options.consumerName}` : q``}
      ${options.errorCode !== undefined ? q`and error_code = ${options.errorCode}` : q``}
      ${options.eventType !== undefined ? q`and event_type = ${options.eventType}` : q``}
      ${
        options.after !== undefined
          ? q`and (quarantined_at, inbox_id) < (${options.after.at}::text::timestamptz, ${options.after.id}::uuid)`
          : q``
      }
    order by quarantined_at desc, inbox_id desc
    limit ${options.limit + 1}`;
  return toPage(rows, options.limit, (r) => r.inbox_id);
}

/**
 * A keyset page from `limit + 1` fetched rows: the extra row only says that another page
 * exists; the cursor is the last returned row's sort key (`sort_at`, dropped from the rows).
 */
export function toPage<R extends { sort_at: string }>(
  rows: readonly R[],
  limit: number,
  idOf: (row: R) => string,
): { rows: Omit<R, 'sort_at'>[]; next: { at: string; id: string } | null } {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    rows: page.map(({ sort_at: _, ...row }) => row),
    next: rows.length > limit && last !== undefined ? { at: last.sort_at, id: idOf(last) } : null,
  };
}
