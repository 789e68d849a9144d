/**
 * `npm start` as a user runs it, in a child process with its own embedded PostgreSQL: the
 * exit status says what happened (0 passed, 1 failed or not settled, 2 bad options, 130
 * Ctrl-C), the output says why, and no temporary folder is left behind.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { embeddedEnv, embeddedLeftovers, isRoot, openTmpDir, REPO_ROOT, run, start, START } from './support';

const [NODE, ...SCRIPT] = START;

describe('npm start exit status', () => {
  it('is 2 for a bad option, naming it, before anything starts', async () => {
    const result = await run('npm', ['start', '--silent', '--', '--events', 'many'], { cwd: REPO_ROOT, env: embeddedEnv() });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--events many');
    expect(result.stdout).not.toContain('Starting an embedded PostgreSQL');
  });

  it('is 1 when the run does not settle before --timeout, naming the failed checks', async () => {
    const tmp = openTmpDir('inbox-e2e-timeout-');
    const result = await run(
      NODE,
      [...SCRIPT, '--events', '3000', '--timeout', '1', '--log-level', 'silent', '--report', join(tmp, 'report.html')],
      {
        cwd: REPO_ROOT,
        env: embeddedEnv({ TMPDIR: tmp }),
      },
    );
    expect(result.code, result.stderr).toBe(1);
    expect(result.stdout).toMatch(/\d+ of 15 checks FAILED: settled before the timeout; /);
    expect(result.stdout).toContain('✗ settled before the timeout');
    expect(embeddedLeftovers(tmp)).toEqual([]);
  });

  it('is 130 after Ctrl-C, with the summary of what ran so far, the report, and the embedded server stopped and removed', async () => {
    const tmp = openTmpDir('inbox-e2e-sigint-');
    const report = join(tmp, 'report.html');
    // Its own process group, signalled as a whole: what a terminal does on Ctrl-C.
    const child = start(NODE, [...SCRIPT, '--events', '4000', '--log-level', 'silent', '--report', report], {
      cwd: REPO_ROOT,
      env: embeddedEnv({ TMPDIR: tmp }),
      detached: true,
    });
    await child.waitFor(/batches [1-9]/);
    process.kill(-child.pid, 'SIGINT');
    const result = await child.finished;

    expect(result.code, result.stderr).toBe(130);
    expect(result.stderr).toContain('Ctrl-C: stopping; what ran so far follows');
    expect(result.stdout).toMatch(/case-projection\s+[\d,]+\s+[\d,]+/);
    expect(result.stdout).toContain('States so far:');
    expect(result.stdout).toMatch(/Interrupted after \d+\.\d s: the summary above is what ran so far/);
    expect(result.stdout).not.toContain('Checks:');
    expect(result.stdout).toContain(`Report: ${report}`);
    expect(existsSync(report)).toBe(true);
    expect(embeddedLeftovers(tmp)).toEqual([]);
    // The server ran with its data under tmp: no process may still mention it.
    const survivors = await run('pgrep', ['-f', tmp]);
    expect(survivors.stdout.trim()).toBe('');
  });

  it.skipIf(!isRoot)('is 1 at once, saying what to do, when the postgres user cannot reach TMPDIR (root)', async () => {
    const closed = openTmpDir('inbox-e2e-closed-');
    const tmp = join(closed, 'tmp');
    await run('mkdir', ['-m', '700', tmp]);
    const result = await run(NODE, [...SCRIPT, '--events', '100', '--log-level', 'silent', '--report', join(closed, 'report.html')], {
      cwd: REPO_ROOT,
      env: embeddedEnv({ TMPDIR: tmp }),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('npm start: PostgreSQL runs as the `postgres` user here');
    expect(result.stderr).toContain('Set TMPDIR to a folder every user can traverse');
    expect(embeddedLeftovers(tmp)).toEqual([]);
  });
});
