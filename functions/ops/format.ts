/**
 * Human-readable output of the CLI: aligned tables and short sentences. Scripts use
 * `--json`, which prints the command's result as the Lambda returns it.
 */
import type { CommandName } from './schemas';

type Row = Record<string, unknown>;
type Column = [header: string, value: (row: Row) => unknown];

function cell(v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

export function table(rows: readonly Row[], columns: readonly Column[]): string {
  if (rows.length === 0) return '(none)';
  const cells = rows.map((r) => columns.map(([, f]) => cell(f(r))));
  const widths = columns.map(([h], i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (values: readonly string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(columns.map(([h]) => h)), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
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

const get = (key: string) => (r: Row) => r[key];

function nextPage(cursor: unknown): string {
  return typeof cursor === 'string' ? `\nmore: repeat with --cursor ${cursor}` : '';
}

/** The ids a replay did not take, and why ('' when none). */
export function formatSkipped(skipped: unknown): string {
  if (!Array.isArray(skipped) || skipped.length === 0) return '';
  return `skipped:\n${table(skipped as Row[], [['inbox id', get('inboxId')], ['why', get('reason')]])}`;
}

function skippedLines(skipped: unknown): string {
  const text = formatSkipped(skipped);
  return text === '' ? '' : `\n${text}`;
}

const replayColumns: Column[] = [
  ['inbox id', get('inboxId')],
  ['consumer', get('consumer')],
  ['event type', get('eventType')],
  ['aggregate', get('aggregate')],
  ['error code', get('errorCode')],
  ['attempts', get('attempts')],
  ['quarantined at', get('quarantinedAt')],
];

export function formatResult(command: CommandName, result: unknown): string {
  const r = result as Row;
  switch (command) {
    case 'stats':
      return table(r.consumers as Row[], [
        ['consumer', (c) => (c.declared ? c.consumer : `${String(c.consumer)} (undeclared)`)],
        ['received', (c) => (c.statuses as Row).RECEIVED],
        ['processing', (c) => (c.statuses as Row).PROCESSING],
        ['retry', (c) => (c.statuses as Row).RETRY_PENDING],
        ['quarantined', get('quarantined')],
        ['processed', (c) => (c.statuses as Row).PROCESSED],
        ['ignored', (c) => (c.statuses as Row).IGNORED],
        ['due', get('due')],
        ['oldest due', (c) => age(c.oldestDueAgeSeconds)],
        ['poison', get('poisonUnresolved')],
        ['oldest poison', (c) => age(c.oldestPoisonAgeSeconds)],
      ]);
    case 'quarantine':
      return table(r.summary as Row[], [
        ['consumer', get('consumer_name')],
        ['event type', get('event_type')],
        ['error code', get('error_code')],
        ['total', get('total')],
        ['first seen', get('first_seen')],
        ['last seen', get('last_seen')],
      ]);
    case 'quarantine-list':
      return (
        table(r.rows as Row[], [
          ['inbox id', get('inbox_id')],
          ['consumer', get('consumer_name')],
          ['event type', get('event_type')],
          ['aggregate', (x) => `${String(x.aggregate_type)}/${String(x.aggregate_id)}`],
          ['attempts', get('attempt_count')],
          ['error code', get('error_code')],
          ['error', get('error_message')],
          ['quarantined at', get('quarantined_at')],
        ]) + nextPage(r.nextCursor)
      );
    case 'replay':
    case 'schedule-replay':
      if (command === 'schedule-replay') {
        return [
          `created schedule ${String(r.groupName)}/${String(r.schedule)}: ${String(r.expression)} UTC, deleted after it runs`,
          `rows matching now: ${String(r.matchingNow)} (the replay selects again when it runs, up to ${String((r.input as Row).limit)})`,
        ].join('\n');
      }
      if (r.dryRun === true) {
        return (
          `dry run: would replay ${String(r.wouldReplay)} of ${String(r.matched)} matching QUARANTINED row(s) ` +
          `(limit ${String(r.limit)}); nothing changed\n` +
          table(r.rows as Row[], replayColumns) +
          skippedLines(r.skipped)
        );
      }
      return (
        `replayed ${String(r.replayed)} row(s) to RETRY_PENDING (audit ${String(r.auditId)})` +
        (Number(r.remaining) > 0 ? `; ${String(r.remaining)} more still match: run again` : '') +
        '\n' +
        table(r.rows as Row[], replayColumns) +
        skippedLines(r.skipped)
      );
    case 'poison-list':
      return (
        table(r.rows as Row[], [
          ['poison id', get('poison_id')],
          ['consumer', get('consumer_name')],
          ['topic/partition@offset', (x) => `${String(x.topic_name)}/${String(x.partition_no)}@${String(x.offset_no)}`],
          ['error code', get('error_code')],
          ['error', get('error_message')],
          ['size', get('raw_length')],
          ['created at', get('created_at')],
          ['resolved', (x) => (x.resolved_at === null ? '-' : `${cell(x.resolved_at)} by ${cell(x.resolved_by)}`)],
        ]) + nextPage(r.nextCursor)
      );
    case 'poison-show': {
      const row = r.row as Row;
      const { raw_value: raw, ...rest } = row;
      const width = Math.max(...Object.keys(rest).map((k) => k.length));
      return [
        ...Object.entries(rest).map(([k, v]) => `${k.padEnd(width)}  ${cell(v)}`),
        `raw_value (${cell(row.raw_encoding)}):`,
        cell(raw),
      ].join('\n');
    }
    case 'poison-reingest':
      if (r.dryRun === true) {
        return `valid with today's schemas: ${String(r.eventType)}@${String(r.eventVersion)} event ${String(r.eventId)}; nothing changed`;
      }
      return (
        `poison row ${String(r.poisonId)} resolved: ` +
        (r.alreadyInInbox === true
          ? `event ${String(r.eventId)} was already in the inbox as ${String(r.inboxId)}`
          : `stored as inbox row ${String(r.inboxId)} (RECEIVED) for ${String(r.consumer)}`)
      );
    case 'pause':
    case 'resume':
      return r.changed === true
        ? `${String(r.consumer)}: schedule ${String(r.groupName)}/${String(r.schedule)} ${String(r.previous)} → ${String(r.state)}`
        : `${String(r.consumer)}: schedule ${String(r.groupName)}/${String(r.schedule)} already ${String(r.state)}; nothing changed`;
  }
}
