/**
 * `npm run invoke` as a process: a function's handler in a process of its own, as its own
 * role on this test's database, with an event file (one written by npm run generate-event).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../helpers/db';

const exec = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));
const db = await useTestDatabase();

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function npm(args: string[], env: Record<string, string> = { DATABASE_URL: db.url }): Promise<Run> {
  try {
    const { stdout, stderr } = await exec('npm', ['run', '--silent', ...args], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function file(name: string, text: string): Promise<string> {
  const path = join(await mkdtemp(join(tmpdir(), 'invoke-')), name);
  await writeFile(path, text);
  return path;
}

const accepted = (caseId: string) =>
  JSON.stringify({
    eventId: `evt_${caseId}`,
    eventType: 'regulatory.case.accepted.v1',
    eventVersion: 1,
    occurredAt: '2026-12-06T09:00:00Z',
    producer: 'case-command-service',
    aggregateType: 'case',
    aggregateId: caseId,
    payload: { caseId, acceptedAt: '2026-12-06T09:00:00Z' },
  });

beforeEach(async () => {
  await db.sql`truncate integration.consumer_inbox, integration.consumer_raw_poison, read_model.case_summary`;
});

describe('npm run invoke', () => {
  it('ingests a generated event as the consumer’s ingest role, then processes it as its worker role', async () => {
    const values = await file('values.jsonl', `${accepted('case_i1')}\n${accepted('case_i2')}\nnot json\n`);
    const generated = await npm([
      'generate-event',
      '--',
      'kafka',
      '--topic',
      'regulatory.case.events.v1',
      '--values',
      values,
      '--partition',
      '3',
    ]);
    expect(generated.code).toBe(0);
    const event = await file('event.json', generated.stdout);

    const ingest = await npm(['invoke', '--', 'ingest', 'case-projection', '--event', event]);
    expect(ingest.code, ingest.stderr).toBe(0);
    expect(JSON.parse(ingest.stdout)).toEqual({ batchItemFailures: [] });
    expect(await db.sql`select event_id, status from integration.consumer_inbox order by event_id`).toEqual([
      { event_id: 'evt_case_i1', status: 'RECEIVED' },
      { event_id: 'evt_case_i2', status: 'RECEIVED' },
    ]);
    expect(await db.sql`select error_code from integration.consumer_raw_poison`).toEqual([{ error_code: 'INVALID_JSON' }]);

    const worker = await npm(['invoke', '--', 'worker', 'case-projection', '--env', 'WORKER_IDLE_MS=0']);
    expect(worker.code, worker.stderr).toBe(0);
    expect(JSON.parse(worker.stdout)).toMatchObject({ claimed: 2, processed: 2, quarantined: 0 });
    expect(await db.sql`select case_id, case_status from read_model.case_summary order by case_id`).toEqual([
      { case_id: 'case_i1', case_status: 'ACCEPTED' },
      { case_id: 'case_i2', case_status: 'ACCEPTED' },
    ]);
    // The function's own log lines go to stderr, the result alone to stdout.
    expect(worker.stdout.trim().startsWith('{')).toBe(true);
  });

  it('runs the reaper and an ops command, which serve every consumer', async () => {
    const reaper = await npm(['invoke', '--', 'reaper']);
    expect(reaper.code, reaper.stderr).toBe(0);
    expect(JSON.parse(reaper.stdout)).toEqual({ released: 0, quarantined: 0, purged: 0 });

    const command = await file('command.json', JSON.stringify({ command: 'stats', consumer: 'case-sla' }));
    const ops = await npm(['invoke', '--', 'ops', '--event', command]);
    expect(ops.code, ops.stderr).toBe(0);
    expect(JSON.parse(ops.stdout)).toMatchObject({ ok: true, command: 'stats' });
  });

  it('exits 1 when the handler fails, with its error on stderr', async () => {
    // A relay without brokers fails its cold start, naming what is missing.
    const relay = await npm(['invoke', '--', 'relay', 'case-sla']);
    expect(relay.code).toBe(1);
    expect(relay.stdout).toBe('');
    expect(relay.stderr).toContain('KAFKA_BROKERS: required for the relay');
  });

  it.each([
    [['invoke', '--'], 'name a function'],
    [['invoke', '--', 'ingest', 'case-projection'], 'ingest needs --event'],
    [['invoke', '--', 'worker'], 'worker needs a consumer'],
    [['invoke', '--', 'worker', 'no-such-consumer'], 'unknown consumer "no-such-consumer"'],
    [['invoke', '--', 'relay', 'case-projection'], 'case-projection emits no events: it has no relay'],
    [['invoke', '--', 'reaper', 'case-sla'], 'reaper serves every consumer'],
  ])('exits 2 on %j, saying why', async (args, message) => {
    const result = await npm(args);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
  });

  it('exits 2 without DATABASE_URL', async () => {
    const result = await npm(['invoke', '--', 'reaper'], {});
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('DATABASE_URL is not set');
  });
});
