/**
 * What the local run prints: the live progress line and the closing summary.
 *
 * On a terminal the progress is one line rewritten in place; elsewhere (CI logs, a pipe)
 * it is a plain line every few seconds, so a log stays readable.
 */
import type { CheckResult } from './checks';

export interface Output {
  write(text: string): void;
}

export interface ProgressSnapshot {
  elapsedMs: number;
  batches: number;
  /** Records delivered by the mappings (redeliveries included). */
  records: number;
  /** Records still to commit, over all mappings. */
  lag: number;
  inboxRows: number;
  due: number;
  processing: number;
  final: number;
  quarantined: number;
  poison: number;
  redelivered: number;
  infraFailures: number;
  crashes: number;
  reaped: number;
}

/** A count as the summaries print it (the terminal's and the HTML report's). */
export const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

export function progressLine(s: ProgressSnapshot, previous?: ProgressSnapshot): string {
  const seconds = s.elapsedMs / 1000;
  const dt = previous === undefined ? seconds : (s.elapsedMs - previous.elapsedMs) / 1000;
  const dr = previous === undefined ? s.records : s.records - previous.records;
  const rate = dt > 0 ? dr / dt : 0;
  return [
    `${seconds.toFixed(1).padStart(5)}s`,
    `batches ${fmt(s.batches)}`,
    `records ${fmt(s.records)} (${fmt(rate)}/s, lag ${fmt(s.lag)})`,
    `inbox ${fmt(s.inboxRows)}: due ${fmt(s.due)}, processing ${fmt(s.processing)}, final ${fmt(s.final)}, quarantined ${fmt(s.quarantined)}`,
    `poison ${fmt(s.poison)}`,
    `redelivered ${fmt(s.redelivered)}`,
    `db down ${fmt(s.infraFailures)}`,
    `crashes ${s.crashes}, reaped ${fmt(s.reaped)}`,
  ].join(' · ');
}

export class Progress {
  private last: ProgressSnapshot | undefined;
  private lastPrintedAt = -Infinity;
  private lineOpen = false;

  constructor(
    private readonly out: Output,
    private readonly tty: boolean,
    private readonly plainEveryMs = 2_000,
  ) {}

  update(s: ProgressSnapshot): void {
    if (this.tty) {
      const columns = (process.stdout.columns ?? 160) - 1;
      const line = progressLine(s, this.last);
      this.out.write(`\r\u001b[2K${line.length > columns ? `${line.slice(0, columns - 1)}…` : line}`);
      this.lineOpen = true;
      this.last = s;
      return;
    }
    if (s.elapsedMs - this.lastPrintedAt < this.plainEveryMs) return;
    this.out.write(`${progressLine(s, this.last)}\n`);
    this.last = s;
    this.lastPrintedAt = s.elapsedMs;
  }

  /** Print the final state and leave the line. */
  finish(s: ProgressSnapshot): void {
    if (this.tty) {
      this.update(s);
      if (this.lineOpen) this.out.write('\n');
      this.lineOpen = false;
      return;
    }
    this.out.write(`${progressLine(s, this.last)}\n`);
  }
}

export interface ConsumerSummary {
  consumer: string;
  received: number;
  inserted: number;
  duplicates: number;
  poison: number;
  processed: number;
  retried: number;
  quarantined: number;
  ignored: number;
  reaped: number;
}

/** The counts of the per-consumer summary, in the order both summaries print them. */
export const SUMMARY_COUNTS = [
  'received',
  'inserted',
  'duplicates',
  'poison',
  'processed',
  'retried',
  'quarantined',
  'ignored',
  'reaped',
] as const satisfies readonly (keyof ConsumerSummary)[];

const COLUMNS: { key: keyof ConsumerSummary; title: string }[] = [
  { key: 'consumer', title: 'consumer' },
  ...SUMMARY_COUNTS.map((key) => ({ key, title: key })),
];

/** A plain-text table: the first column left-aligned, the others (numbers) right-aligned. */
function textTable(titles: readonly string[], cells: readonly string[][]): string {
  const widths = titles.map((t, i) => Math.max(t.length, ...cells.map((row) => row[i]!.length)));
  const line = (values: readonly string[]) => values.map((v, i) => (i === 0 ? v.padEnd(widths[i]!) : v.padStart(widths[i]!))).join('  ');
  return [line(titles), widths.map((w) => '─'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}

export function summaryTable(rows: readonly ConsumerSummary[]): string {
  const cells = rows.map((r) => COLUMNS.map((c) => (c.key === 'consumer' ? String(r[c.key]) : fmt(r[c.key] as number))));
  return textTable(
    COLUMNS.map((c) => c.title),
    cells,
  );
}

/** Received → processed for one consumer, milliseconds: the ProcessingLatency values its workers emitted. */
export interface ConsumerLatency {
  consumer: string;
  /** Rows with a value (the worker emits one per row it processed or ignored). */
  rows: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
  /** Inline consumers: most rows are processed by ingest, which emits no latency. */
  inline: boolean;
}

/** The latency table of the summary: one line per consumer, milliseconds. */
export function latencyTable(rows: readonly ConsumerLatency[]): string {
  const ms = (v: number | null) => (v === null ? '–' : fmt(v));
  const cells = rows.map((r) => [`${r.consumer}${r.inline ? ' (inline)' : ''}`, fmt(r.rows), ms(r.p50), ms(r.p95), ms(r.p99), ms(r.max)]);
  return textTable(['received → processed, ms', 'rows', 'p50', 'p95', 'p99', 'max'], cells);
}

export function checksReport(checks: readonly CheckResult[]): string {
  return checks.map((c) => `  ${c.ok ? '✓' : '✗'} ${c.name}: ${c.detail}`).join('\n');
}
