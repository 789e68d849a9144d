/**
 * Helpers for the CLI's human-readable output: aligned tables and short sentences. Each
 * command formats its own result (./commands/); scripts use `--json`, which prints the
 * result as the Lambda returns it.
 */
import type { candidateView } from './selection';

export type Row = Record<string, unknown>;
export type Column<T = Row> = [header: string, value: (row: T) => unknown];

export function cell(v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

export function table<T extends object>(rows: readonly T[], columns: readonly Column<T>[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((r) => columns.map(([, f]) => cell(f(r))));
  const widths = columns.map(([h], i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns.map(([h]) => h)), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/** `key  value` lines, keys aligned. */
export function fields(entries: readonly (readonly [string, unknown])[]): string {
  const width = Math.max(...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `${k.padEnd(width)}  ${cell(v)}`).join('\n');
}

/** 0s, 42s, 3m 12s, 5h 01m, 2d 03h. */
export function age(seconds: unknown): string {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '-';
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d ${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}

/** A column that shows one field (the row type comes from the table's rows). */
export const get =
  <T extends object>(key: keyof T) =>
  (r: T): unknown =>
    r[key];

export function nextPage(cursor: string | null): string {
  return cursor !== null ? `\nmore: repeat with --cursor ${cursor}` : '';
}

/** The ids a command did not take, and why ('' when none). */
export function formatSkipped(skipped: unknown): string {
  if (!Array.isArray(skipped) || skipped.length === 0) return '';
  return `skipped:\n${table(skipped as Row[], [
    ['inbox id', get('inboxId')],
    ['why', get('reason')],
  ])}`;
}

export function skippedLines(skipped: unknown): string {
  const text = formatSkipped(skipped);
  return text === '' ? '' : `\n${text}`;
}

/** The QUARANTINED rows a replay or resolve took (functions/ops/selection.ts candidateView). */
export const candidateColumns: Column<ReturnType<typeof candidateView>>[] = [
  ['inbox id', get('inboxId')],
  ['consumer', get('consumer')],
  ['event type', get('eventType')],
  ['aggregate', get('aggregate')],
  ['error code', get('errorCode')],
  ['attempts', get('attempts')],
  ['quarantined at', get('quarantinedAt')],
];

type ActionRows = { rows: ReturnType<typeof candidateView>[]; skipped: unknown };

/** A replay's or resolve's dry run: how many of how many, and which. */
export function formatDryRun(verb: string, r: ActionRows & { matched: number; limit: number }): string {
  return (
    `dry run: would ${verb} ${r.rows.length} of ${r.matched} matching QUARANTINED row(s) (limit ${r.limit}); nothing changed\n` +
    table(r.rows, candidateColumns) +
    skippedLines(r.skipped)
  );
}

/** A replay's or resolve's real run: what became of the rows, and whether more still match. */
export function formatDone(what: string, r: ActionRows & { auditId: string; remaining: number }): string {
  return (
    `${what} (audit ${r.auditId})` +
    (r.remaining > 0 ? `; ${r.remaining} more still match: run again` : '') +
    '\n' +
    table(r.rows, candidateColumns) +
    skippedLines(r.skipped)
  );
}

/** The audit row an AWS action left, or the warning that it could not be written (functions/ops/command.ts recordOrLog). */
export function auditLine(auditId: string | null): string {
  return auditId !== null ? `audit ${auditId}` : 'WARNING: the audit row could not be written; it was logged instead (ops_audit_unwritten)';
}
