/**
 * The picture of a local run: one self-contained HTML page (no network: Chart.js is
 * inlined) with the run's outcome, the per-consumer summary, the checks, and a chart per
 * dashboard widget and consumer over the run's time (timeline.ts), with the injected
 * faults as markers.
 *
 * The page holds metrics and identifiers of the run only, never an event's payload.
 */
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { CheckResult } from './checks';
import { fmt, SUMMARY_COUNTS, type ConsumerSummary } from './report';
import { FAULT_LABELS, type Timeline } from './timeline';
import type { RunTraces, WaterfallBar } from './traces';

export interface ReportInput {
  timeline: Timeline;
  outcome: 'passed' | 'failed' | 'interrupted';
  /** The closing line of the run, e.g. "All 12 checks passed in 11.6 s." */
  headline: string;
  /** The options that shaped the run, one line. */
  description: string;
  summary: readonly ConsumerSummary[];
  checks: readonly CheckResult[];
  /** The run's traces (traces.ts): one event's waterfall, and where all traced events' time went. */
  traces: RunTraces;
  generatedAt: Date;
}

/** Chart.js's own browser build (UMD, with its license header). */
function chartJsSource(): string {
  const main = createRequire(import.meta.url).resolve('chart.js');
  return readFileSync(join(dirname(main), 'chart.umd.min.js'), 'utf8');
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** JSON that can sit inside a <script> element: no "</script>", no "<!--". */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

function summaryTable(rows: readonly ConsumerSummary[]): string {
  const head = `<tr><th>consumer</th>${SUMMARY_COUNTS.map((k) => `<th>${k}</th>`).join('')}</tr>`;
  const body = rows.map(
    (r) => `<tr><td>${escapeHtml(r.consumer)}</td>${SUMMARY_COUNTS.map((k) => `<td class="n">${fmt(r[k])}</td>`).join('')}</tr>`,
  );
  return `<table class="summary">${head}${body.join('')}</table>`;
}

function checksList(checks: readonly CheckResult[]): string {
  if (checks.length === 0) return '<p class="muted">No checks ran: the run was interrupted before it finished.</p>';
  const items = checks.map(
    (c) => `<li class="${c.ok ? 'ok' : 'failed'}">${c.ok ? '✓' : '✗'} <b>${escapeHtml(c.name)}</b>: ${escapeHtml(c.detail)}</li>`,
  );
  return `<ul class="checks">${items.join('')}</ul>`;
}

const BAR_COLOURS: Record<WaterfallBar['kind'], string> = {
  produced: '#8250df',
  stored: '#0969da',
  waited: '#d0d7de',
  retried: '#fb8f44',
  processed: '#1a7f37',
  published: '#bf3989',
};

const duration = (value: number) => (value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`);

/**
 * One event's trace as a waterfall: a row per span (and per wait between them), each bar
 * placed on the trace's time axis, so the asynchronous gaps show as what they are.
 */
function traceSection(traces: RunTraces): string {
  const { waterfall, breakdown } = traces;
  if (waterfall === null) return '<p class="muted">No traced event completed in this run.</p>';
  const total = Math.max(1, ...waterfall.bars.map((b) => b.endMs));
  const rows = waterfall.bars.map((b) => {
    // A bar too short to see is drawn 0.4 % wide, kept inside its track.
    const width = Math.max(0.4, ((b.endMs - b.startMs) / total) * 100);
    const left = Math.min((b.startMs / total) * 100, 100 - width);
    return (
      `<div class="wf-row" data-kind="${b.kind}"><span class="wf-label">${escapeHtml(b.label)}</span>` +
      `<span class="wf-track"><span class="wf-bar" style="left:${left.toFixed(3)}%;width:${width.toFixed(3)}%;background:${BAR_COLOURS[b.kind]}"></span></span>` +
      `<span class="wf-time">${duration(b.endMs - b.startMs)}${b.detail === '' ? '' : ` · ${escapeHtml(b.detail)}`}</span></div>`
    );
  });
  const parts = breakdown.parts
    .map(
      (p) =>
        `<tr><td>${escapeHtml(p.label)}</td><td class="n">${duration(p.ms)}</td><td class="n">${(p.share * 100).toFixed(1)} %</td></tr>`,
    )
    .join('');
  const stack = breakdown.parts
    .filter((p) => p.share > 0)
    .map(
      (p, i) =>
        `<span class="bd-part" title="${escapeHtml(p.label)}" style="width:${(p.share * 100).toFixed(3)}%;background:hsl(${(i * 57) % 360} 55% 55%)"></span>`,
    )
    .join('');
  return `<p class="muted">Event ${escapeHtml(waterfall.eventId)}, trace ${escapeHtml(waterfall.traceId)}: its producer's send, each consumer's
ingest batch (linked), the wait for a worker, every attempt (a child of the producer's span), and what the relay published in the same trace.
${duration(total)} from send to the last span.</p>
<div id="trace-waterfall">${rows.join('')}</div>
<h3>Where the time went</h3>
<p class="muted">Over ${breakdown.events.toLocaleString('en-US')} traced events and their consumers, from each event's store to its last attempt and its publish.</p>
<div id="trace-breakdown" class="bd-stack">${stack}</div>
<table class="summary">${parts}</table>`;
}

/** What a reader needs to read a widget right, where the chart alone would mislead. */
const NOTES: Record<string, string> = {
  processing:
    'The worker emits these counts once per invocation, when its drain ends (the ingest function, for inline consumers, once per batch): ' +
    'a drain of several seconds shows as one spike at its end. Latency is emitted per event, as each one finishes.',
};

function widgetSections(timeline: Timeline): string {
  const consumers = [...new Set(timeline.widgets.map((w) => w.consumer))];
  return consumers
    .map((consumer) => {
      const widgets = timeline.widgets.filter((w) => w.consumer === consumer);
      const charts = widgets
        .filter((w) => w.series.length > 0)
        .map(
          (w) =>
            `<figure class="widget" data-widget="${escapeHtml(w.id)}" data-consumer="${escapeHtml(consumer)}">` +
            `<figcaption>${escapeHtml(`${consumer}: ${w.title}`)}</figcaption>` +
            `<canvas id="chart-${escapeHtml(consumer)}-${escapeHtml(w.id)}" width="560" height="300"></canvas>` +
            (w.awsOnly.length > 0 ? `<p class="muted">In AWS also: ${escapeHtml(w.awsOnly.join(', '))} (published by AWS).</p>` : '') +
            (NOTES[w.id] ? `<p class="muted">${escapeHtml(NOTES[w.id]!)}</p>` : '') +
            '</figure>',
        );
      const awsOnly = widgets.filter((w) => w.series.length === 0);
      const note =
        awsOnly.length > 0
          ? `<p class="muted">Dashboard widgets drawn from metrics only AWS publishes, not charted here: ${awsOnly
              .map((w) => `${escapeHtml(w.title)} (${escapeHtml(w.awsOnly.join(', '))})`)
              .join('; ')}.</p>`
          : '';
      return `<section><h2>${escapeHtml(consumer)}</h2><div class="grid">${charts.join('')}</div>${note}</section>`;
    })
    .join('');
}

/** Runs in the browser: one Chart.js chart per canvas, from the embedded data. */
const PAGE_SCRIPT = String.raw`
(function () {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2'];
  var faultStyle = {
    'database-unreachable': { color: '#8b0000', pointStyle: 'crossRot', y: 0.97 },
    'commit-lost': { color: '#7f7f7f', pointStyle: 'rectRot', y: 0.92 },
    'worker-crash': { color: '#000000', pointStyle: 'triangle', y: 0.87 }
  };
  Chart.defaults.animation = false;
  Chart.defaults.font.size = 11;
  data.timeline.widgets.forEach(function (w) {
    var canvas = document.getElementById('chart-' + w.consumer + '-' + w.id);
    if (!canvas) return;
    var datasets = w.series.map(function (s, i) {
      return {
        label: s.label + (s.stat === 'Sum' ? ' /s' : '') + (s.hasData ? '' : ' (no data)'),
        data: s.values.map(function (v, j) { return { x: data.timeline.seconds[j], y: v }; }),
        yAxisID: s.axis === 'right' ? 'right' : 'left',
        borderColor: palette[i % palette.length],
        backgroundColor: palette[i % palette.length],
        borderWidth: 1.5,
        // Gauges and percentiles may have a single value (a lone point draws no line).
        pointRadius: s.stat === 'Sum' ? 0 : 2,
        spanGaps: true
      };
    });
    Object.keys(faultStyle).forEach(function (kind) {
      var points = data.timeline.faults
        .filter(function (f) { return f.consumer === w.consumer && f.kind === kind; })
        .map(function (f) { return { x: f.second, y: faultStyle[kind].y, count: f.count }; });
      if (points.length === 0) return;
      datasets.push({
        type: 'scatter',
        label: data.faultLabels[kind],
        data: points,
        yAxisID: 'faults',
        pointStyle: faultStyle[kind].pointStyle,
        pointRadius: 6,
        borderWidth: 2,
        borderColor: faultStyle[kind].color,
        backgroundColor: faultStyle[kind].color
      });
    });
    var hasRight = w.series.some(function (s) { return s.axis === 'right'; });
    var perSecond = function (axis) {
      return w.series.filter(function (s) { return s.axis === axis; }).every(function (s) { return s.stat === 'Sum'; }) ? ' per second' : '';
    };
    new Chart(canvas, {
      type: 'line',
      data: { datasets: datasets },
      options: {
        responsive: false,
        parsing: true,
        interaction: { mode: 'nearest', intersect: false },
        scales: {
          x: { type: 'linear', min: 0, max: data.timeline.seconds[data.timeline.seconds.length - 1] + data.timeline.bucketSeconds,
               title: { display: true, text: 'seconds since the run started' } },
          left: { type: 'linear', axis: 'y', position: 'left', beginAtZero: true,
                  title: { display: !!w.leftLabel, text: (w.leftLabel || '') + perSecond('left') } },
          right: { type: 'linear', axis: 'y', position: 'right', beginAtZero: true, display: hasRight, grid: { drawOnChartArea: false },
                   title: { display: !!w.rightLabel, text: (w.rightLabel || '') + perSecond('right') } },
          faults: { type: 'linear', axis: 'y', display: false, min: 0, max: 1 }
        },
        plugins: {
          legend: { labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              label: function (ctx) {
                if (ctx.dataset.yAxisID === 'faults') return ctx.raw.count + ' × ' + ctx.dataset.label;
                return ctx.dataset.label + ': ' + (ctx.raw.y === null ? 'no value' : Math.round(ctx.raw.y * 100) / 100);
              }
            }
          }
        }
      }
    });
  });
  document.body.setAttribute('data-charts-ready', 'true');
})();
`;

export function renderReport(input: ReportInput): string {
  const { timeline } = input;
  const data = { timeline, faultLabels: FAULT_LABELS };
  const bucket = timeline.bucketSeconds === 1 ? 'one-second' : `${timeline.bucketSeconds}-second`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>npm start: ${escapeHtml(input.headline)}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  h2 { font-size: 16px; margin: 28px 0 8px; }
  .outcome { font-weight: 600; }
  .outcome.passed { color: #1a7f37; } .outcome.failed, .outcome.interrupted { color: #cf222e; }
  .muted { color: #666; font-size: 12px; }
  table.summary { border-collapse: collapse; margin: 8px 0; }
  table.summary th, table.summary td { border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: left; }
  table.summary td.n { text-align: right; font-variant-numeric: tabular-nums; }
  ul.checks { list-style: none; padding: 0; margin: 8px 0; }
  ul.checks li { margin: 2px 0; } li.ok { color: #1a7f37; } li.failed { color: #cf222e; }
  ul.checks li b { color: #222; font-weight: 600; }
  .grid { display: grid; grid-template-columns: repeat(auto-fill, 580px); gap: 12px; }
  figure.widget { margin: 0; padding: 8px; border: 1px solid #ddd; border-radius: 4px; background: #fff; }
  figcaption { font-weight: 600; margin-bottom: 4px; }
  #trace-waterfall { border: 1px solid #ddd; border-radius: 4px; padding: 6px 8px; max-width: 1180px; }
  .wf-row { display: grid; grid-template-columns: 280px 1fr 260px; align-items: center; gap: 8px; height: 20px; }
  .wf-label, .wf-time { font-size: 12px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .wf-track { position: relative; height: 12px; background: #f6f8fa; }
  .wf-bar { position: absolute; top: 0; height: 12px; border-radius: 2px; }
  .bd-stack { display: flex; height: 16px; max-width: 1180px; margin: 6px 0; border-radius: 3px; overflow: hidden; }
  .bd-part { display: block; height: 16px; }
</style>
</head>
<body>
<h1>Local run report</h1>
<p class="outcome ${input.outcome}">${escapeHtml(input.headline)}</p>
<p class="muted">${escapeHtml(input.description)} · generated ${escapeHtml(input.generatedAt.toISOString())}</p>
${summaryTable(input.summary)}
<h2>Checks</h2>
${checksList(input.checks)}
<p class="muted">The charts below are the CloudWatch dashboard's widgets (cdk/constructs/dashboard-widgets.ts), drawn from the
metrics the functions emitted during this run, over ${bucket} buckets. Markers: faults the run injected.</p>
${widgetSections(timeline)}
<h2>One event's trace</h2>
${traceSection(input.traces)}
<script type="application/json" id="report-data">${scriptJson(data)}</script>
<script>${chartJsSource()}</script>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

/** Write the page, creating its folder. */
export async function writeReport(path: string, input: ReportInput): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, renderReport(input), 'utf8');
}
