/**
 * The operator audit (integration.operator_audit): one row per operator action, written by
 * the action itself, in its own transaction when it changes inbox rows.
 */
import type { Queryable } from '../../lib/db';
import { toPage } from './quarantine';
import { sinceBound, type Since } from './since';

/** The actions the table's check constraint admits (migrations 0070, 0100, 0170). */
export const OPERATOR_ACTIONS = [
  'replay',
  'resolve',
  'reingest',
  'pause',
  'resume',
  'schedule-replay',
  'scheduled-replay-refused',
  'reingest-failed',
] as const;
export type OperatorAction = (typeof OPERATOR_ACTIONS)[number];
export type ActionSource = 'cli' | 'lambda' | 'schedule';

export interface OperatorActionEntry {
  action: OperatorAction;
  /** Null only for an anonymous dry run. */
  actor: string | null;
  reason: string | null;
  source: ActionSource;
  /** The Lambda request that ran the action (null from the CLI). */
  requestId?: string | null;
  dryRun: boolean;
  consumerNames: readonly string[];
  /** What was asked, as given. */
  request: Record<string, unknown>;
  /** Rows or resources changed (a dry run: would have changed). */
  affectedCount: number;
  inboxIds?: readonly string[];
  outcome?: Record<string, unknown>;
}

export interface OperatorAuditRow {
  audit_id: string;
  action: OperatorAction;
  actor: string | null;
  reason: string | null;
  source: ActionSource;
  dry_run: boolean;
  consumer_names: string[];
  request: Record<string, unknown>;
  affected_count: number;
  inbox_ids: string[];
  outcome: Record<string, unknown>;
  request_id: string | null;
  /** The login role that wrote the row, recorded by the database (migrations/0203); null on rows older than it. */
  session_role: string | null;
  created_at: Date;
}

export async function recordOperatorAction(q: Queryable, entry: OperatorActionEntry): Promise<OperatorAuditRow> {
  const [row] = await q<OperatorAuditRow[]>`
    insert into integration.operator_audit
      (action, actor, reason, source, request_id, dry_run, consumer_names, request, affected_count, inbox_ids, outcome)
    values (${entry.action}, ${entry.actor}, ${entry.reason}, ${entry.source}, ${entry.requestId ?? null}, ${entry.dryRun},
            ${[...new Set(entry.consumerNames)].sort()}::text[], ${JSON.stringify(entry.request)}::text::jsonb,
            ${entry.affectedCount}, ${[...(entry.inboxIds ?? [])]}::uuid[], ${JSON.stringify(entry.outcome ?? {})}::text::jsonb)
    returning *`;
  return row!;
}

export interface AuditListOptions {
  consumerName?: string | undefined;
  action?: OperatorAction | undefined;
  since?: Since | undefined;
  after?: { at: string; id: string } | undefined;
  limit: number;
}

/** Actions newest first, keyset-paged on (created_at, audit_id). */
export async function listOperatorActions(q: Queryable, options: AuditListOptions) {
  const rows = await q<(OperatorAuditRow & { sort_at: string })[]>`
    select *, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as sort_at
    from integration.operator_audit
    where true
      ${options.consumerName !== undefined ? q`and ${options.consumerName} = any(consumer_names)` : q``}
      ${options.action !== undefined ? q`and action = ${options.action}` : q``}
      ${options.since !== undefined ? q`and created_at >= ${sinceBound(q, options.since)}` : q``}
      ${
        options.after !== undefined
          ? q`and (created_at, audit_id) < (${options.after.at}::text::timestamptz, ${options.after.id}::uuid)`
          : q``
      }
    order by created_at desc, audit_id desc
    limit ${options.limit + 1}`;
  return toPage(rows, options.limit, (r) => r.audit_id);
}

export type ActionOnRows = Pick<
  OperatorAuditRow,
  'audit_id' | 'action' | 'actor' | 'reason' | 'source' | 'affected_count' | 'created_at'
> & {
  /** Which of the asked-for rows it changed (an action may have changed thousands of others). */
  touched: string[];
};

/** The actions that changed any of these inbox rows (dry runs left out), oldest first. */
export async function actionsOnInboxRows(q: Queryable, inboxIds: readonly string[]): Promise<ActionOnRows[]> {
  if (inboxIds.length === 0) return [];
  return q<ActionOnRows[]>`
    select audit_id, action, actor, reason, source, affected_count, created_at,
           array(select unnest(inbox_ids) intersect select unnest(${inboxIds as string[]}::uuid[]))::text[] as touched
    from integration.operator_audit
    where inbox_ids && ${inboxIds as string[]}::uuid[] and not dry_run
    order by created_at, audit_id`;
}
