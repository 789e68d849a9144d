/**
 * The local run (`npm start`) end to end on a small stream, through the real ingest,
 * worker and reaper, against a test database: its invariants hold and it says so; on a
 * database that breaks them it fails, naming the check; as a child process its exit code
 * follows.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { runChecks } from '../../../tools/local/checks';
import { generateStream } from '../../../tools/local/generator';
import type { LocalOptions } from '../../../tools/local/options';
import { relayChecks, SimulatedTopics } from '../../../tools/local/relay';
import { DatabaseNotEmptyError, runLocal } from '../../../tools/local';
import { createTestDatabase, useTestDatabase } from '../../helpers/db';
import { smallRun } from './small-run';

const run = promisify(execFile);

const outDir = mkdtempSync(join(tmpdir(), 'inbox-local-run-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

const SMALL = smallRun({ seed: 11, reportFile: join(outDir, 'report.html') });

const CONSUMERS = ['case-projection', 'case-sla', 'notification-service'];

describe('runLocal', async () => {
  const db = await useTestDatabase();
  let output = '';
  const result = await runLocal(SMALL, { databaseUrl: db.url, out: { write: (t) => void (output += t) } });

  it('passes every invariant check and exits 0', () => {
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.checks.length).toBe(15);
    expect(result.exitCode).toBe(0);
    expect(result.interrupted).toBe(false);
    expect(output).toContain('All 15 checks passed');
    expect(result.checks.map((c) => c.name)).toContain('every obligation event published exactly once');
  });

  it('writes the report, charting what the functions emitted, and prints its path', () => {
    expect(output).toContain(`Report: ${SMALL.reportFile}`);
    const html = readFileSync(SMALL.reportFile, 'utf8');
    const data = JSON.parse(html.match(/<script type="application\/json" id="report-data">(.*?)<\/script>/s)![1]!) as {
      timeline: { widgets: { consumer: string; id: string; series: { label: string; values: (number | null)[] }[] }[] };
    };
    const received = data.timeline.widgets
      .find((w) => w.consumer === 'case-projection' && w.id === 'ingest')!
      .series.find((s) => s.label === 'RecordsReceived')!;
    // Per-second rates over one-second buckets: their sum is what the summary counted.
    const sum = received.values.reduce<number>((n, v) => n + (v ?? 0), 0);
    expect(sum).toBe(result.consumers.find((c) => c.consumer === 'case-projection')!.received);
    expect(html).not.toContain('<script src=');
  });

  it('leaves every row final, one per consumer and event, and the poison captured', async () => {
    const rows = await db.sql<{ consumer_name: string; status: string; n: number }[]>`
      select consumer_name, status, count(*)::int as n from integration.consumer_inbox group by 1, 2`;
    expect(rows.filter((r) => ['RECEIVED', 'RETRY_PENDING', 'PROCESSING'].includes(r.status))).toEqual([]);
    const stream = generateStream(SMALL);
    for (const consumer of CONSUMERS) {
      const total = rows.filter((r) => r.consumer_name === consumer).reduce((n, r) => n + r.n, 0);
      expect(total).toBe(stream.expected.get(consumer)!.size);
    }
    const [poison] = await db.sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_raw_poison`;
    expect(poison!.n).toBe([...stream.poison.values()].reduce((n, p) => n + p.length, 0));
    expect(poison!.n).toBeGreaterThan(0);
  });

  it('drove every path: redeliveries, unreachable database, retries, quarantines, a crash the reaper recovered', () => {
    expect(output).toMatch(/with the database unreachable/);
    const total = (k: 'duplicates' | 'retried' | 'quarantined' | 'reaped' | 'ignored') => result.consumers.reduce((n, c) => n + c[k], 0);
    expect(total('duplicates')).toBeGreaterThan(0);
    expect(total('retried')).toBeGreaterThan(0);
    expect(total('quarantined')).toBeGreaterThan(0);
    expect(total('ignored')).toBeGreaterThan(0);
    expect(total('reaped')).toBeGreaterThan(0);
    expect(result.consumers.map((c) => c.consumer)).toEqual(CONSUMERS);
    // The relay: refusals retried and both kinds of relay crash taken over.
    expect(output).toMatch(
      /Outbox relay: .* [1-9][\d,]* events? published, .*crashes before-publish \(\d+ rows?\), after-ack \(\d+ rows?\)/,
    );
  });

  it('refuses a database that already holds rows', async () => {
    await expect(runLocal(SMALL, { databaseUrl: db.url, out: { write: () => {} } })).rejects.toBeInstanceOf(DatabaseNotEmptyError);
  });

  it('fails the outbox checks, naming the case, when a topic lacks an obligation’s event or the outbox is not drained', async () => {
    await db.sql`update integration.outbox set published_at = null where outbox_seq = (select min(outbox_seq) from integration.outbox)`;
    const stats = { invocations: 1, published: 0, refused: 0, crashes: [], crashesNotSimulated: 0 };

    const checks = await relayChecks(db.sql, new SimulatedTopics({ seed: 1, refuseRate: 0 }), stats);

    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['every obligation event published exactly once', false],
      ['outbox drained', false],
    ]);
    expect(checks[0]!.detail).toMatch(/^case_\S+: event \S+ never published/);
    expect(checks[1]!.detail).toMatch(/^1 rows unpublished/);
  });

  it('fails the checks, naming them, when the database breaks the invariants', async () => {
    const stream = generateStream(SMALL);
    const [job] = await db.sql<{ source_event_id: string }[]>`
      delete from public.notification_jobs
      where job_id = (select job_id from public.notification_jobs order by created_at limit 1)
      returning source_event_id`;
    await db.sql`
      update integration.consumer_inbox
      set status = 'PROCESSING', locked_by = 'test', locked_at = now(), lease_expires_at = now() + interval '1 hour'
      where inbox_id = (select inbox_id from integration.consumer_inbox where consumer_name = 'case-sla' and status = 'PROCESSED' limit 1)`;
    const checks = await runChecks(db.sql, stream, {
      consumers: CONSUMERS,
      lag: new Map(),
      crashed: new Map(),
      // Asked for, never happened: a check that proves nothing must fail.
      crashesRequested: 2,
      reaped: new Map(),
      ingestInserted: new Map(CONSUMERS.map((c) => [c, stream.expected.get(c)!.size])),
      ingestPoisoned: new Map(CONSUMERS.map((c) => [c, stream.poison.get(c)!.length])),
      timedOut: false,
    });
    const failed = checks.filter((c) => !c.ok);
    expect(failed.map((c) => c.name)).toEqual([
      'every event processed once or quarantined for its injected reason',
      'nothing left PROCESSING, RECEIVED or RETRY_PENDING',
      'one notification job per payment, for its org_id',
      "a crashed worker's rows recovered by the reaper",
    ]);
    expect(failed[2]!.detail).toContain(`${job!.source_event_id}: no notification job`);
    expect(failed[3]!.detail).toContain('2 crashes requested, none simulated');
  });
});

describe('runLocal under steady load', () => {
  // 450 events over 3 s; the schedule at the production period: with this seed its first
  // ticks come 24 s and more into the run, long after the stream, so the workers that drain
  // it are the ones the ingest functions woke (and those hand over to).
  const STEADY: LocalOptions = {
    ...SMALL,
    rate: 150,
    durationSeconds: 3,
    events: 450,
    tickMs: 60_000,
    batchingWindowMs: 200,
    // A crashed worker's rows wait for the reaper's tick: a minute here.
    crashes: 0,
    timeoutSeconds: 40,
  };

  it('drains through wake-ups alone, prints received → processed per consumer, and passes every check', async () => {
    const db = await createTestDatabase();
    try {
      let output = '';
      const result = await runLocal(
        { ...STEADY, reportFile: join(outDir, 'steady.html') },
        { databaseUrl: db.url, out: { write: (t) => void (output += t) } },
      );

      expect(result.checks.filter((c) => !c.ok)).toEqual([]);
      expect(result.exitCode).toBe(0);
      for (const consumer of ['case-projection', 'case-sla']) {
        const latency = result.latency.find((l) => l.consumer === consumer)!;
        expect(latency.rows, consumer).toBe(
          result.consumers.find((c) => c.consumer === consumer)!.processed + result.consumers.find((c) => c.consumer === consumer)!.ignored,
        );
        expect(latency.p50, consumer).not.toBeNull();
        expect(latency.p50!).toBeLessThanOrEqual(latency.p95!);
        expect(latency.p95!).toBeLessThanOrEqual(latency.p99!);
        const workers = result.workers.find((w) => w.consumer === consumer)!;
        expect(workers.wokenByIngest, consumer).toBeGreaterThan(0);
        // Every invocation was a wake-up's (or one a woken worker sent, or ops resume's in the
        // pause drill): none was the schedule's.
        expect(workers.invocations, consumer).toBe(workers.wokenByIngest + workers.fannedOut + workers.handedOver + workers.resumed);
      }
      expect(output).toMatch(/received → processed, ms\s+rows\s+p50\s+p95\s+p99\s+max/);
      expect(output).toMatch(/case-projection\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+[\d,]+\n/);
      expect(output).toContain('Steady load: 150 events/s for 3 s; schedule every 60,000 ms');
    } finally {
      await db.drop();
    }
  });

  it('with --no-wake-ups, sends none: the schedule alone starts the workers', async () => {
    const db = await createTestDatabase();
    try {
      const result = await runLocal(
        { ...STEADY, wakeUps: false, tickMs: 500, reportFile: join(outDir, 'steady-off.html') },
        { databaseUrl: db.url, out: { write: () => {} } },
      );

      expect(result.checks.filter((c) => !c.ok)).toEqual([]);
      for (const w of result.workers) {
        expect(w, w.consumer).toMatchObject({ wokenByIngest: 0, fannedOut: 0, handedOver: 0, wakeUpFailures: 0 });
        expect(w.invocations, w.consumer).toBeGreaterThan(0);
      }
    } finally {
      await db.drop();
    }
  });
});

describe('runLocal interrupted', () => {
  it('stops when its signal aborts, summarizes what ran, runs no checks and writes the report', async () => {
    const db = await createTestDatabase();
    try {
      const controller = new AbortController();
      let output = '';
      const reportFile = join(outDir, 'interrupted.html');
      const result = await runLocal(
        { ...SMALL, events: 3_000, reportFile },
        {
          databaseUrl: db.url,
          signal: controller.signal,
          out: {
            write: (t) => {
              output += t;
              // Abort once the stream is flowing.
              if (/batches [1-9]/.test(t)) controller.abort();
            },
          },
        },
      );
      expect(result.interrupted).toBe(true);
      expect(result.ok).toBe(false);
      expect(result.checks).toEqual([]);
      expect(output).toMatch(/Interrupted after \d+\.\d s: the summary above is what ran so far/);
      expect(output).toContain('States so far:');
      expect(output).not.toContain('Checks:');
      expect(existsSync(reportFile)).toBe(true);
      const [rows] = await db.sql<{ n: number }[]>`select count(*)::int as n from integration.consumer_inbox`;
      expect(rows!.n).toBeGreaterThan(0);
      expect(result.consumers.reduce((n, c) => n + c.inserted, 0)).toBe(rows!.n);
    } finally {
      await db.drop();
    }
  });
});

describe('npm start as a child process', () => {
  const script = new URL('../../../scripts/local.ts', import.meta.url).pathname;
  const tsx = new URL('../../../node_modules/.bin/tsx', import.meta.url).pathname;

  it('runs against DATABASE_URL and exits 0 with the summary', async () => {
    const db = await createTestDatabase();
    try {
      const args = [
        '--events',
        '120',
        '--seed',
        '5',
        '--crashes',
        '1',
        '--tick-ms',
        '100',
        '--log-level',
        'silent',
        '--report',
        join(outDir, 'child.html'),
      ];
      // A run that exits non-zero fails with what it printed: the checks say what went wrong.
      const { stdout } = await run(tsx, [script, ...args], {
        env: { ...process.env, DATABASE_URL: db.url },
        timeout: 55_000,
      }).catch((error: { code?: number; stdout?: string }) => {
        throw new Error(`npm start exited ${error.code}:\n${error.stdout ?? ''}`);
      });
      expect(stdout).toMatch(/case-projection\s+\d+/);
      expect(stdout).toContain('All 15 checks passed');
    } finally {
      await db.drop();
    }
  });
});
