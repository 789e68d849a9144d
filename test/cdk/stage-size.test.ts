/**
 * A stage that grows: fifty consumers in consumer stacks of twelve, offline. Every stack
 * stays within its budget (80 % of CloudFormation's 500 resources and 1 MB), the ops
 * function's environment does not grow with the consumers (Lambda allows 4 KB), every
 * dashboard stays under CloudWatch's 500 widgets, cdk-nag finds nothing, the stage's
 * connections fit the writer's max_connections (and one that does not is refused); adding a
 * consumer rewrites nothing that another consumer or the platform deployed.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONSUMER_STACK, parseStageConfig, StageConfigError } from '../../cdk/config';
import { connectionBudget, formatConnectionBudget } from '../../cdk/connection-budget';
import { checkStackBudgets, STACK_BUDGET, StackBudgetError, stackSizes } from '../../cdk/stacks/budget';
import { CONSUMERS } from '../../functions/consumers/index';
import { manyConsumers, teamConsumer } from './many-consumers';
import { CDK_JSON, synthesize, unacknowledgedNagErrors, type Synthesized } from './synth';

/** CloudWatch's limits: widgets per dashboard, bytes of a function's environment. */
const DASHBOARD_WIDGETS = 500;
const LAMBDA_ENVIRONMENT_BYTES = 4 * 1024;

type Resource = { Type: string; Properties: Record<string, any> };
const resourcesOf = (t: Template, type: string) => Object.entries(t.findResources(type)) as [string, Resource][];

/** The widgets of a dashboard resource (its body, with references as placeholders). */
function widgetsOf(dashboard: Resource): unknown[] {
  const body = dashboard.Properties.DashboardBody as string | { 'Fn::Join': [string, unknown[]] };
  const text = typeof body === 'string' ? body : body['Fn::Join'][1].map((p) => (typeof p === 'string' ? p : 'REF')).join('');
  return (JSON.parse(text) as { widgets: unknown[] }).widgets;
}

describe('a stage of 53 consumers (the 3 shipped and 50 test-only), 12 to a consumer stack', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'inbox-50-'));
  /** The dev stage with a writer large enough for fifty consumers' connections (dev's own 2 ACU are not: below). */
  const WRITER = { database: { ...(CDK_JSON.context.stages.dev as { database: object }).database, maxCapacityAcu: 8 } };
  let s: Synthesized;
  beforeAll(() => {
    s = synthesize({ bundle: false, consumers: manyConsumers(50), outdir, overrides: WRITER });
  });
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it('keeps every stack within its budget, with the margin it states', () => {
    const sizes = checkStackBudgets(s.app.synth());
    console.log(sizes.map((z) => `${z.stackName}: ${z.resources} resources, ${z.templateBytes} bytes`).join('\n'));
    expect(sizes.map((z) => z.stackName).sort()).toEqual(
      ['stateful', 'stateless', 'consumers-main', ...[1, 2, 3, 4, 5].map((n) => `consumers-team-${n}`)]
        .map((n) => `KafkaInbox-dev-${n}`)
        .sort(),
    );
    for (const z of sizes) {
      expect(z.resources, z.stackName).toBeLessThanOrEqual(STACK_BUDGET.resources);
      expect(z.templateBytes, z.stackName).toBeLessThanOrEqual(STACK_BUDGET.templateBytes);
    }
    expect(STACK_BUDGET).toEqual({ resources: 400, templateBytes: 800_000 });
  });

  it("keeps the ops function's environment the size it has with 3 consumers, far under Lambda's 4 KB", () => {
    const [[, ops]] = resourcesOf(s.platform, 'AWS::Lambda::Function').filter(([, f]) =>
      /^Kafka inbox operator/.test(f.Properties.Description),
    ) as [[string, Resource]];
    const variables = ops.Properties.Environment.Variables as Record<string, unknown>;
    const bytes = JSON.stringify(variables).length;
    console.log(`ops environment: ${bytes} bytes of the template (the deployed values are shorter)`);
    expect(bytes).toBeLessThan(LAMBDA_ENVIRONMENT_BYTES / 4);
    expect(JSON.stringify(variables)).not.toContain('team-consumer');
  });

  it('keeps each dashboard under 500 widgets: one per consumer stack and the overview', () => {
    const dashboards = [s.platform, ...Object.values(s.consumerStacks)].flatMap((t) => resourcesOf(t, 'AWS::CloudWatch::Dashboard'));
    expect(dashboards).toHaveLength(1 + 6);
    const counts = dashboards.map(([, d]) => widgetsOf(d).length);
    console.log(`widgets per dashboard: ${counts.join(', ')}`);
    for (const n of counts) expect(n).toBeLessThan(DASHBOARD_WIDGETS);
    // The overview names no consumer: it charts them all by SEARCH.
    const overview = JSON.stringify(resourcesOf(s.platform, 'AWS::CloudWatch::Dashboard'));
    expect(overview).not.toContain('team-consumer');
    expect(overview).toContain('SEARCH(');
  });

  it('passes cdk-nag AwsSolutions', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });

  it("prints its connection budget against the writer's max_connections, and the connections alarm fires where the budget ends", () => {
    const budget = connectionBudget(s.config);
    const printed = formatConnectionBudget('dev', budget);
    console.log(printed);

    // 53 × 1 mapping × 2 pollers × 5; 53 × (4 slots + 1); case-sla's relay, twice; the reaper, twice; ops 2 × 2; the migration.
    expect(budget.lines.map((l) => [l.function, l.connections])).toEqual([
      ['ingest', 530],
      ['worker', 265],
      ['relay', 2],
      ['reaper', 2],
      ['ops', 4],
      ['migration', 1],
    ]);
    expect(printed).toMatch(
      /^Connection budget of stage dev: 804 of 1,335 \(the connections alarm's 80 % of max_connections 1,669: Aurora Serverless v2 at 0\.5–8 ACU\)/,
    );
    const [[, alarm]] = resourcesOf(s.platform, 'AWS::CloudWatch::Alarm').filter(
      ([, a]) => a.Properties.MetricName === 'DatabaseConnections',
    ) as [[string, Resource]];
    expect(alarm.Properties.Threshold).toBe(budget.limit);
  });

  it("is refused at dev's own 2 ACU, with the numbers and what to change", () => {
    expect(() => parseStageConfig('dev', CDK_JSON.context.stages.dev, manyConsumers(50))).toThrow(
      /stages\.dev: the functions can hold 804 connections at once \(ingest 530, worker 265, …\), over the budget of 320 \(alarms\.databaseConnectionsPercent of max_connections 400: Aurora Serverless v2 at 0\.5–2 ACU\)\. Lower consumerDefaults\.maxPollers or workerMaxConcurrency[^.]*, raise database\.maxCapacityAcu \(max_connections changes only when the writer restarts\)/,
    );
  });
});

describe('adding a consumer', () => {
  let before: Synthesized;
  let after: Synthesized;
  beforeAll(() => {
    // 13 test consumers: team-1 is full, team-2 holds the 13th; the 14th joins it.
    before = synthesize({ bundle: false, consumers: manyConsumers(13) });
    after = synthesize({ bundle: false, consumers: manyConsumers(14) });
  });

  it('rewrites no other stack, and nothing of another consumer in its own stack', () => {
    expect(after.stateful.toJSON()).toEqual(before.stateful.toJSON());
    // In the platform: only what reads the manifest of the declarations (docs/stacks.md) — the
    // code of the migration function (and with it its trigger), the reaper and ops.
    const platformResources = (t: Template) => t.toJSON().Resources as Record<string, unknown>;
    const [p0, p1] = [platformResources(before.platform), platformResources(after.platform)];
    const platformChanged = [...new Set([...Object.keys(p0), ...Object.keys(p1)])].filter(
      (id) => JSON.stringify(p0[id]) !== JSON.stringify(p1[id]),
    );
    for (const id of platformChanged)
      expect(id).toMatch(/^(MigrationsFunction|MigrationsTrigger|OpsFunction[0-9A-F]+$|ReaperFunction[0-9A-F]+$)/);
    for (const fn of ['Migrations', 'Ops', 'Reaper'])
      expect(
        platformChanged.some((id) => new RegExp(`^${fn}Function[0-9A-F]+$`).test(id)),
        fn,
      ).toBe(true);
    for (const id of platformChanged.filter((i) => /^(Migrations|Ops|Reaper)Function[0-9A-F]+$/.test(i))) {
      const { Code: _code0, ...rest0 } = (p0[id] as { Properties: Record<string, unknown> }).Properties;
      const { Code: _code1, ...rest1 } = (p1[id] as { Properties: Record<string, unknown> }).Properties;
      expect(rest1, id).toEqual(rest0);
    }
    expect(after.consumerStacks.main!.toJSON()).toEqual(before.consumerStacks.main!.toJSON());
    expect(after.consumerStacks['team-1']!.toJSON()).toEqual(before.consumerStacks['team-1']!.toJSON());

    // In team-2: every resource of team-consumer-13 is unchanged; what changes is the new
    // consumer's own resources and the stack's dashboard (a row more).
    const resources = (t: Template) => t.toJSON().Resources as Record<string, unknown>;
    const old = resources(before.consumerStacks['team-2']!);
    const now = resources(after.consumerStacks['team-2']!);
    const rewritten = Object.keys(old).filter((id) => JSON.stringify(old[id]) !== JSON.stringify(now[id]));
    expect(rewritten).toEqual([expect.stringMatching(/^Dashboard/)]);
    expect(Object.keys(old).filter((id) => !(id in now))).toEqual([]);
    const added = Object.keys(now).filter((id) => !(id in old));
    expect(added.length).toBeGreaterThan(20);
    for (const id of added) expect(id).toMatch(/^(TeamConsumer14|Alarmsteamconsumer14)/);
  });
});

describe("a consumer's stack", () => {
  const declared = (stack?: string) => [...CONSUMERS, { ...teamConsumer(0), ...(stack === undefined ? {} : { stack }) }];
  const dev = CDK_JSON.context.stages.dev;

  it("is the declaration's choice, or main; the stage may choose another", () => {
    const placed = (config: ReturnType<typeof parseStageConfig>) => Object.fromEntries(config.consumers.map((c) => [c.name, c.stack]));
    expect(placed(parseStageConfig('dev', dev, declared()))).toMatchObject({ 'case-projection': 'main', 'team-consumer-01': 'team-1' });
    const { stack: _unused, ...unplaced } = teamConsumer(0);
    expect(placed(parseStageConfig('dev', dev, [...CONSUMERS, unplaced]))).toMatchObject({ 'team-consumer-01': 'main' });
    const staged = { ...(dev as object), consumers: { 'team-consumer-01': { stack: 'payments' } } };
    expect(placed(parseStageConfig('dev', staged, declared()))).toMatchObject({ 'team-consumer-01': 'payments' });
  });

  it('does not move from the stack it is recorded in unless the stage acknowledges the move', () => {
    const recorded = { 'team-consumer-01': 'team-1' };
    expect(() => parseStageConfig('dev', dev, declared('team-2'), recorded)).toThrow(StageConfigError);
    expect(() => parseStageConfig('dev', dev, declared('team-2'), recorded)).toThrow(
      /stages\.dev\.consumers\.team-consumer-01: moves from consumer stack "team-1" to "team-2", which replaces its functions, event-source mappings and schedule\. If that is meant, set stages\.dev\.consumers\.team-consumer-01\.movedFrom to "team-1"/,
    );
    const acknowledged = { ...(dev as object), consumers: { 'team-consumer-01': { movedFrom: 'team-1' } } };
    expect(parseStageConfig('dev', acknowledged, declared('team-2'), recorded).consumers.at(-1)!.stack).toBe('team-2');
    // A movedFrom that is not the record is a mistake too.
    const wrong = { ...(dev as object), consumers: { 'team-consumer-01': { movedFrom: 'main' } } };
    expect(() => parseStageConfig('dev', wrong, declared('team-2'), recorded)).toThrow(
      /movedFrom: "main" is not where it is recorded \("team-1"\)/,
    );
  });

  it('records, in cdk.json, where each consumer of a stage is deployed, unless it is in the default stack', () => {
    const recorded = CDK_JSON.context.consumerStacks as Record<string, Record<string, string>>;
    for (const stage of Object.keys(CDK_JSON.context.stages)) {
      const config = parseStageConfig(stage, CDK_JSON.context.stages[stage], CONSUMERS, recorded[stage]);
      const placed = Object.fromEntries(config.consumers.map((c) => [c.name, c.stack]));
      // A record is needed only outside main: a consumer new to a stage, in main, adds none.
      expect({ ...Object.fromEntries(config.consumers.map((c) => [c.name, DEFAULT_CONSUMER_STACK])), ...recorded[stage] }, stage).toEqual(
        placed,
      );
    }
  });

  it('holds at most 12 consumers: the 13th is refused with the consumers to place elsewhere', () => {
    const thirteen = Array.from({ length: 13 }, (_, i) => ({ ...teamConsumer(i), stack: 'team-1' }));
    expect(() => parseStageConfig('dev', dev, [...CONSUMERS, ...thirteen])).toThrow(
      /consumer stack "team-1" would hold 13 consumers, at most 12 fit one stack: give the consumers added last \(team-consumer-13\) another stack/,
    );
  });
});

describe('the budget check', () => {
  it('fails synth naming the stack over its budget and what to do', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'inbox-budget-'));
    try {
      const s = synthesize({ bundle: false, outdir });
      const assembly = s.app.synth();
      const sizes = stackSizes(assembly);
      const main = sizes.find((z) => z.stackName === 'KafkaInbox-dev-consumers-main')!;
      expect(main.templateBytes).toBe(readFileSync(join(outdir, 'KafkaInbox-dev-consumers-main.template.json')).length);
      // The same assembly against a budget it exceeds: the check names the stack and what to do.
      const tight = { resources: main.resources - 1, templateBytes: STACK_BUDGET.templateBytes };
      expect(() => checkStackBudgets(assembly, tight)).toThrow(StackBudgetError);
      expect(() => checkStackBudgets(assembly, tight)).toThrow(
        new RegExp(
          `KafkaInbox-dev-consumers-main: ${main.resources} resources \\(budget ${main.resources - 1}, CloudFormation's limit 500\\)[\\s\\S]*move the consumers added last to another stack`,
        ),
      );
      expect(() => checkStackBudgets(assembly)).not.toThrow();
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  });
});
