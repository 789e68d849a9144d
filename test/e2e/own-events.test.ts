/**
 * `npm start -- --consumer <name> --events <file>` as a user runs it: a consumer the
 * generator does not know (test/fixtures/notes-consumer.ts, given with --declarations),
 * run on a file of its events under the usual faults, passes the checks that hold for any
 * consumer; the same consumer without a grant its handler needs fails, naming the check.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { noteWritten } from '../fixtures/notes-consumer';
import { embeddedEnv, embeddedLeftovers, openTmpDir, REPO_ROOT, run, START } from './support';

const [NODE, ...SCRIPT] = START;
const FIXTURES = join(REPO_ROOT, 'test/e2e/fixtures');

/** 80 notes over 16 aggregates, and a line that is no envelope. */
function eventsFile(dir: string): string {
  const lines = Array.from({ length: 80 }, (_, i) => JSON.stringify(noteWritten(`note-${i}`, `note ${i}`, `book-${i % 16}`)));
  const file = join(dir, 'notes.jsonl');
  writeFileSync(file, [...lines.slice(0, 40), 'not an envelope', ...lines.slice(40), ''].join('\n'));
  return file;
}

function ownRun(tmp: string, declarations: string) {
  return run(
    NODE,
    [
      ...SCRIPT,
      '--consumer',
      'e2e-notes',
      '--events',
      eventsFile(tmp),
      '--declarations',
      join(FIXTURES, declarations),
      '--duplicate-rate',
      '0.2',
      '--redelivery-rate',
      '0.2',
      '--transient-rate',
      '0.1',
      '--crashes',
      '1',
      '--tick-ms',
      '100',
      '--timeout',
      '60',
      '--log-level',
      'silent',
      '--report',
      join(tmp, 'report.html'),
    ],
    { cwd: REPO_ROOT, env: embeddedEnv({ TMPDIR: tmp }) },
  );
}

describe('npm start on your own events', () => {
  it("runs a consumer the generator does not know on a file's events and passes the checks that hold for any consumer", async () => {
    const tmp = openTmpDir('inbox-e2e-own-');
    const result = await ownRun(tmp, 'own-consumer.ts');

    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(0);
    expect(result.stdout).toContain('Your events: 81 values');
    expect(result.stdout).toMatch(/All 8 checks passed/);
    expect(result.stdout).toContain('✓ every record stored once as an inbox row, or captured as poison');
    expect(result.stdout).toContain("✓ the consumer's grants suffice (no row DB_PERMISSION)");
    expect(result.stdout).toMatch(/e2e-notes: PROCESSED 80/);
    expect(embeddedLeftovers(tmp)).toEqual([]);
  });

  it('fails, naming the check, when the consumer lacks a grant its handler needs', async () => {
    const tmp = openTmpDir('inbox-e2e-own-ungranted-');
    const result = await ownRun(tmp, 'own-consumer-ungranted.ts');

    expect(result.code, `${result.stdout}\n${result.stderr}`).toBe(1);
    expect(result.stdout).toMatch(/1 of 8 checks FAILED: the consumer's grants suffice \(no row DB_PERMISSION\)\./);
    expect(result.stdout).toMatch(/✗ the consumer's grants suffice \(no row DB_PERMISSION\)/);
    expect(result.stdout).toMatch(/e2e-notes: QUARANTINED DB_PERMISSION 80/);
  });

  it('refuses an unknown consumer with exit code 2', async () => {
    const tmp = openTmpDir('inbox-e2e-own-unknown-');
    const result = await run(NODE, [...SCRIPT, '--consumer', 'nobody', '--events', eventsFile(tmp)], {
      cwd: REPO_ROOT,
      env: embeddedEnv({ TMPDIR: tmp }),
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--consumer nobody: no such consumer');
  });
});
