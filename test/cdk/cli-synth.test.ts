/**
 * `npx cdk synth` on the repository as cloned: no AWS credentials, no context lookups,
 * no network beyond what the CLI itself skips (notices and version check off). The CLI runs
 * the app's own cdk-nag checks, so a new unacknowledged finding fails here too, and any
 * warning the CLI prints (an unanswered annotation, an unset feature flag) fails every stage;
 * each prints its connection budget.
 * Every stage of cdk.json is synthesized this way, and every stage docs/deploying.md shows is one
 * of them, verbatim.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { CDK_JSON } from './synth';

/** Runs `cdk synth <args>` like a fresh shell would, then hands the output directory to `check`. */
function cdkSynth(args: string[], check: (outdir: string) => void): void {
  const root = new URL('../../', import.meta.url).pathname;
  const home = mkdtempSync(join(tmpdir(), 'inbox-cdk-home-'));
  const outdir = mkdtempSync(join(tmpdir(), 'inbox-cdk-out-'));
  try {
    // Only what a shell needs: no AWS_* variables, and an empty HOME (no ~/.aws).
    const env = { PATH: process.env.PATH ?? '', HOME: home, CDK_DISABLE_VERSION_CHECK: '1', CI: 'true' };
    const result = spawnSync(
      join(root, 'node_modules/.bin/cdk'),
      ['synth', ...args, '--quiet', '--no-notices', '--no-version-reporting', '--output', outdir],
      { cwd: root, env, encoding: 'utf8', timeout: 170_000 },
    );
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
    // Nothing a user could not act on: every annotation answered, every feature flag set.
    const output = `${result.stdout}\n${result.stderr}`;
    expect(output).not.toMatch(/\bWARNING\b/);
    expect(output).not.toMatch(/feature flags? (is|are) not configured/);
    expect(output).toContain('Successfully synthesized');
    // Every synth tells the stage's connections against the writer's max_connections (cdk/connection-budget.ts).
    expect(output).toMatch(
      /Connection budget of stage [\w-]+: [\d,]+ of [\d,]+ \(the connections alarm's \d+ % of max_connections [\d,]+: /,
    );
    expect(existsSync(join(outdir, 'manifest.json'))).toBe(true);
    check(outdir);
  } finally {
    rmSync(home, { recursive: true, force: true });
    rmSync(outdir, { recursive: true, force: true });
  }
}

const templatesIn = (outdir: string) =>
  readdirSync(outdir)
    .filter((f) => f.endsWith('.template.json'))
    .sort();
/** A stage of the shipped consumers: the stateful and platform stacks, and the consumer stack "main". */
const stageTemplates = (stage: string) => ['consumers-main', 'stateful', 'stateless'].map((s) => `KafkaInbox-${stage}-${s}.template.json`);

const STAGES = Object.keys(CDK_JSON.context.stages);

/**
 * The app as the CLI runs it — its own process, the context in CDK_CONTEXT_JSON, an output
 * directory — with no AWS variable and an empty HOME, bundling skipped (the dev run above
 * bundles every function). A lookup would leave a "missing" entry in the manifest, which
 * the CLI would then fetch with credentials; a warning would be in the stacks' metadata.
 */
function appSynth(stage: string, check: (outdir: string) => void): void {
  const root = new URL('../../', import.meta.url).pathname;
  const home = mkdtempSync(join(tmpdir(), 'inbox-cdk-home-'));
  const outdir = mkdtempSync(join(tmpdir(), 'inbox-cdk-out-'));
  try {
    const context = { ...CDK_JSON.context, stage, 'aws:cdk:bundling-stacks': [] };
    const env = { PATH: process.env.PATH ?? '', HOME: home, CDK_CONTEXT_JSON: JSON.stringify(context), CDK_OUTDIR: outdir };
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'cdk/app.ts'], { cwd: root, env, encoding: 'utf8', timeout: 170_000 });
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
    const manifest = JSON.parse(readFileSync(join(outdir, 'manifest.json'), 'utf8')) as {
      missing?: unknown[];
      artifacts: Record<string, { metadata?: Record<string, { type: string; data: unknown }[]> }>;
    };
    expect(manifest.missing ?? []).toEqual([]);
    const warnings = Object.values(manifest.artifacts)
      .flatMap((a) => Object.entries(a.metadata ?? {}))
      .flatMap(([path, entries]) => entries.filter((e) => e.type === 'aws:cdk:warning').map((e) => `${path}: ${JSON.stringify(e.data)}`));
    expect(warnings).toEqual([]);
    check(outdir);
  } finally {
    rmSync(home, { recursive: true, force: true });
    rmSync(outdir, { recursive: true, force: true });
  }
}

// dev and example-schema-registry go through the CLI itself below.
it.each(STAGES.filter((stage) => stage !== 'dev' && stage !== 'example-schema-registry'))(
  'synthesizes the %s stage with no credentials and no lookup, and warns of nothing',
  (stage) => {
    appSynth(stage, (outdir) => {
      expect(templatesIn(outdir)).toEqual(stageTemplates(stage));
    });
  },
);

it('shows in docs/deploying.md only stages that cdk.json has, exactly as cdk.json has them', () => {
  const readme = readFileSync(new URL('../../docs/deploying.md', import.meta.url), 'utf8');
  // A stage in the document is a JSON block "<name>": { … } whose value has msk (which every stage must set).
  const blocks = [...readme.matchAll(/```json\n("[A-Za-z0-9-]+": \{[\s\S]*?\n\})\n```/g)].map(
    (m) => JSON.parse(`{${m[1]!}}`) as Record<string, Record<string, unknown>>,
  );
  const shown = blocks.flatMap((b) => Object.entries(b)).filter(([, value]) => 'msk' in value);
  expect(shown.map(([name]) => name)).toEqual(['example-existing-network', 'example-prod']);
  for (const [name, stage] of shown) expect(stage, name).toEqual(CDK_JSON.context.stages[name]);
});

it('synthesizes every stack offline with no credentials, and warns of nothing', () => {
  cdkSynth([], (outdir) => {
    expect(templatesIn(outdir)).toEqual(stageTemplates('dev'));
  });
});

it('synthesizes the example-schema-registry stage offline, its Glue registry on the declared consumer mapping', () => {
  const stage = 'example-schema-registry';
  const declared = (CDK_JSON.context.stages[stage] as { consumers: Record<string, { schemaRegistry: { registryArn: string } }> }).consumers;
  cdkSynth(['-c', `stage=${stage}`], (outdir) => {
    expect(templatesIn(outdir)).toEqual(stageTemplates(stage));
    const template = JSON.parse(readFileSync(join(outdir, `KafkaInbox-${stage}-consumers-main.template.json`), 'utf8')) as {
      Resources: Record<string, { Type: string; Properties: Record<string, any> }>;
    };
    const withRegistry = Object.values(template.Resources)
      .filter((r) => r.Type === 'AWS::Lambda::EventSourceMapping' && r.Properties.AmazonManagedKafkaEventSourceConfig.SchemaRegistryConfig)
      .map((r) => [
        r.Properties.AmazonManagedKafkaEventSourceConfig.ConsumerGroupId,
        r.Properties.AmazonManagedKafkaEventSourceConfig.SchemaRegistryConfig.SchemaRegistryURI,
      ]);
    expect(withRegistry).toEqual(Object.entries(declared).map(([name, c]) => [name, c.schemaRegistry.registryArn]));
  });
});
