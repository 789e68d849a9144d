/**
 * `npx cdk synth` on the repository as cloned: no AWS credentials, no context lookups,
 * no network beyond what the CLI itself skips (notices and version check off). The CLI runs
 * the app's own cdk-nag checks, so a new unacknowledged finding fails here too.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';

it('synthesizes both stacks offline with no credentials, and warns of nothing', () => {
  const root = new URL('../../', import.meta.url).pathname;
  const home = mkdtempSync(join(tmpdir(), 'inbox-cdk-home-'));
  const outdir = mkdtempSync(join(tmpdir(), 'inbox-cdk-out-'));
  try {
    // Only what a shell needs: no AWS_* variables, and an empty HOME (no ~/.aws).
    const env = { PATH: process.env.PATH ?? '', HOME: home, CDK_DISABLE_VERSION_CHECK: '1', CI: 'true' };
    const result = spawnSync(
      join(root, 'node_modules/.bin/cdk'),
      ['synth', '--quiet', '--no-notices', '--no-version-reporting', '--output', outdir],
      { cwd: root, env, encoding: 'utf8', timeout: 170_000 },
    );
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
    // Nothing a user could not act on: every annotation answered, every feature flag set.
    const output = `${result.stdout}\n${result.stderr}`;
    expect(output).not.toMatch(/\bWARNING\b/);
    expect(output).not.toMatch(/feature flags? (is|are) not configured/);
    expect(output).toContain('Successfully synthesized');
    const templates = readdirSync(outdir).filter((f) => f.endsWith('.template.json')).sort();
    expect(templates).toEqual(['KafkaInbox-dev-stateful.template.json', 'KafkaInbox-dev-stateless.template.json']);
    expect(existsSync(join(outdir, 'manifest.json'))).toBe(true);
  } finally {
    rmSync(home, { recursive: true, force: true });
    rmSync(outdir, { recursive: true, force: true });
  }
});
