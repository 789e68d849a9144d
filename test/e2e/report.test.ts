/**
 * The picture of a run: `npm start` writes its HTML report, and a headless Chromium opens
 * it as a user would (a file, no network) and finds every widget drawn — each series that
 * the functions emitted has its points on the chart, and the chart has ink — and the
 * injected faults marked. A screenshot goes to test-output/ (git-ignored) for a person to
 * look at.
 *
 * Chromium comes from the system (Debian's `chromium`, which .ci/run installs); the test
 * is skipped only outside CI where none is installed.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isInboxSeries, widgetsOf } from '../../cdk/constructs/dashboard-widgets';
import { findConsumer } from '../../functions/consumers';
import type { Timeline } from '../../tools/local/timeline';
import { embeddedEnv, REPO_ROOT, run, type Finished } from './support';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (p) => p !== undefined && existsSync(p),
);
const OUTPUT_DIR = join(REPO_ROOT, 'test-output');
const CONSUMERS = ['case-projection', 'case-sla', 'notification-service'];

let tmp: string;
let report: string;
let result: Finished;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'inbox-e2e-report-'));
  chmodSync(tmp, 0o755);
  report = join(tmp, 'report.html');
  result = await run(
    'npm',
    ['start', '--silent', '--', '--events', '600', '--seed', '3', '--tick-ms', '100', '--log-level', 'silent', '--report', report],
    {
      cwd: REPO_ROOT,
      env: embeddedEnv({ TMPDIR: tmp }),
    },
  );
});

afterAll(() => {
  rmSync(tmp, { recursive: true, force: true });
});

describe('npm start', () => {
  it('exits 0 when every check passes, and prints where the report is', () => {
    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toContain('All 15 checks passed');
    expect(result.stdout).toContain(`Report: ${report}`);
  });

  it('writes one self-contained page: every script inline, nothing fetched', () => {
    const html = readFileSync(report, 'utf8');
    expect(html).not.toMatch(/<script[^>]+src=/);
    expect(html).not.toMatch(/<link[^>]+href=/);
    expect(html).toContain('Chart.js v4');
  });
});

/** What the page's code below touches of the browser and of Chart.js. */
interface PageElement {
  getAttribute(name: string): string;
  getBoundingClientRect(): { left: number; right: number; width: number };
  querySelector(
    selector: string,
  ): PageElement & { getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } } };
  textContent: string;
}
interface PageGlobals {
  document: { getElementById(id: string): PageElement; querySelectorAll(selector: string): Iterable<PageElement> };
  Chart: {
    getChart(canvas: unknown): {
      currentDevicePixelRatio: number;
      chartArea: { left: number; top: number; width: number; height: number };
      data: { datasets: { label: string }[] };
      getDatasetMeta(index: number): { data: { skip?: boolean; x: number; y: number }[] };
    };
  };
}

interface DrawnWidget {
  consumer: string;
  id: string;
  datasets: { label: string; drawn: number }[];
  /** Saturated pixels in the chart area: the series' colours, not grid or text. */
  ink: number;
}

describe.skipIf(CHROMIUM === undefined && !process.env.CI)('the report in a browser', () => {
  let widgets: DrawnWidget[];
  let timeline: Timeline;
  let trace: { kind: string; label: string; widthPx: number; inside: boolean }[];
  let breakdown: { label: string; widthPx: number }[];

  beforeAll(async () => {
    if (CHROMIUM === undefined) throw new Error('chromium is not installed (apt-get install -y chromium; .ci/run does it)');
    const profile = mkdtempSync(join(tmpdir(), 'inbox-chromium-'));
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
      viewport: { width: 1800, height: 1200 },
    });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      // A file page must not reach out: fail any request that is not the file itself.
      await page.route(/^(?!file:)/, (route) => route.abort());
      await page.goto(pathToFileURL(report).href);
      await page.waitForSelector('body[data-charts-ready="true"]', { state: 'attached', timeout: 30_000 });
      expect(errors).toEqual([]);
      mkdirSync(OUTPUT_DIR, { recursive: true });
      await page.screenshot({ path: join(OUTPUT_DIR, 'report.png'), fullPage: true });
      // Runs in the page (the project's TypeScript has no DOM types: the page's globals are typed here).
      timeline = (await page.evaluate(() => {
        const { document } = globalThis as unknown as PageGlobals;
        return JSON.parse(document.getElementById('report-data').textContent).timeline;
      })) as Timeline;
      const waterfall = page.locator('#trace-waterfall');
      await waterfall.screenshot({ path: join(OUTPUT_DIR, 'trace.png') });
      trace = await page.evaluate(() => {
        const { document } = globalThis as unknown as PageGlobals;
        return [...document.querySelectorAll('#trace-waterfall .wf-row')].map((row) => {
          const track = row.querySelector('.wf-track').getBoundingClientRect();
          const bar = row.querySelector('.wf-bar').getBoundingClientRect();
          return {
            kind: row.getAttribute('data-kind'),
            label: row.querySelector('.wf-label').textContent,
            widthPx: bar.width,
            inside: bar.left >= track.left - 0.5 && bar.right <= track.right + 0.5,
          };
        });
      });
      breakdown = await page.evaluate(() => {
        const { document } = globalThis as unknown as PageGlobals;
        return [...document.querySelectorAll('#trace-breakdown .bd-part')].map((part) => ({
          label: part.getAttribute('title'),
          widthPx: part.getBoundingClientRect().width,
        }));
      });
      widgets = await page.evaluate(() => {
        const { document, Chart } = globalThis as unknown as PageGlobals;
        return [...document.querySelectorAll('figure.widget')].map((figure) => {
          const canvas = figure.querySelector('canvas');
          const chart = Chart.getChart(canvas);
          const ratio = chart.currentDevicePixelRatio;
          const area = chart.chartArea;
          // A few pixels beyond the area: a series at zero runs along its bottom edge.
          const pad = 3;
          const pixels = canvas
            .getContext('2d')
            .getImageData(
              (area.left - pad) * ratio,
              (area.top - pad) * ratio,
              (area.width + 2 * pad) * ratio,
              (area.height + 2 * pad) * ratio,
            ).data;
          let ink = 0;
          for (let i = 0; i < pixels.length; i += 4) {
            const [r, g, b] = [pixels[i]!, pixels[i + 1]!, pixels[i + 2]!];
            if (Math.max(r, g, b) - Math.min(r, g, b) > 80) ink += 1;
          }
          return {
            consumer: figure.getAttribute('data-consumer')!,
            id: figure.getAttribute('data-widget')!,
            datasets: chart.data.datasets.map((d, i) => ({
              label: d.label,
              drawn: chart.getDatasetMeta(i).data.filter((el) => !el.skip && Number.isFinite(el.x) && Number.isFinite(el.y)).length,
            })),
            ink,
          };
        });
      });
    } finally {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });

  it('draws one chart per consumer and dashboard widget that has metrics of ours', () => {
    const expected = CONSUMERS.flatMap((c) =>
      widgetsOf({ emits: findConsumer(c)?.emits !== undefined })
        .filter((w) => [...w.left, ...(w.right ?? [])].some(isInboxSeries))
        .map((w) => `${c}/${w.id}`),
    );
    expect(widgets.map((w) => `${w.consumer}/${w.id}`)).toEqual(expected);
  });

  it("draws every series the functions emitted, over the run's time, and none they did not", () => {
    for (const w of widgets) {
      const data = timeline.widgets.find((t) => t.consumer === w.consumer && t.id === w.id)!;
      data.series.forEach((series, i) => {
        const drawn = w.datasets[i]!.drawn;
        const points = series.values.filter((v) => v !== null).length;
        expect(drawn, `${w.consumer}/${w.id} ${series.label}`).toBe(points);
        if (series.hasData) expect(points, `${w.consumer}/${w.id} ${series.label}`).toBeGreaterThan(0);
      });
      // At least a dot's worth of the series' colours per series drawn (a lone value is a dot).
      expect(w.ink, `${w.consumer}/${w.id}`).toBeGreaterThanOrEqual(10 * data.series.filter((s) => s.hasData).length);
    }
    // The run moved records and events for every consumer.
    for (const c of CONSUMERS) {
      for (const [id, label] of [
        ['ingest', 'RecordsReceived'],
        ['processing', 'EventsProcessed'],
        ['backlog', 'DueDepth'],
      ] as const) {
        const series = timeline.widgets.find((t) => t.consumer === c && t.id === id)!.series.find((s) => s.label === label)!;
        expect(series.hasData, `${c}/${id} ${label}`).toBe(true);
      }
    }
  });

  it("draws one event's trace as a waterfall: produced, stored, waited, processed and published, each bar visible in its track", () => {
    const kinds = trace.map((r) => r.kind);
    expect(kinds[0]).toBe('produced');
    for (const kind of ['stored', 'waited', 'processed', 'published']) expect(kinds, kind).toContain(kind);
    // Each consumer's rows in journey order: stored before its first attempt.
    for (const consumer of new Set(trace.filter((r) => r.kind === 'stored').map((r) => r.label.split(':')[0]!))) {
      const mine = trace.filter((r) => r.label.startsWith(`${consumer}:`)).map((r) => r.kind);
      expect(mine.indexOf('stored'), consumer).toBeLessThan(mine.indexOf('processed'));
    }
    for (const row of trace) {
      expect(row.widthPx, row.label).toBeGreaterThan(0);
      expect(row.inside, row.label).toBe(true);
    }
  });

  it("draws where all events' time went, processing and the wait for a worker among its parts", () => {
    const labels = breakdown.filter((p) => p.widthPx > 0).map((p) => p.label);
    expect(labels).toContain('processing (claim to commit)');
    expect(labels).toContain('waiting for a worker');
  });

  it('marks the injected faults on the charts of the consumer they hit', () => {
    const markers = widgets.flatMap((w) => w.datasets.filter((d) => /database unreachable|commit lost|worker crashed/.test(d.label)));
    expect(markers.length).toBeGreaterThan(0);
    expect(markers.every((d) => d.drawn > 0)).toBe(true);
    const crashes = widgets.filter((w) => w.datasets.some((d) => d.label === 'worker crashed' && d.drawn > 0)).map((w) => w.consumer);
    expect(new Set(crashes)).toEqual(new Set(['case-projection', 'case-sla']));
  });
});
