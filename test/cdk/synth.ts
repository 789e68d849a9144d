/**
 * Synthesis for the CDK tests: the stage contexts come from cdk.json, exactly what
 * `npx cdk synth` uses. Bundling is optional: the tests that only read the template of a
 * variant stage skip it (CDK's `aws:cdk:bundling-stacks` context) to stay fast.
 */
import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { CONSUMERS } from '../../functions/consumers/index';
import { parseStageConfig, type DeclaredConsumer, type StageConfig } from '../../cdk/config';
import { createInboxStacks, type InboxStacks } from '../../cdk/stacks/index';
import { platformParameterName, type PlatformParameter } from '../../cdk/stacks/platform-references';
import { statefulParameterName, type StatefulParameter } from '../../cdk/stacks/stage-references';

interface CdkJson {
  context: { stages: Record<string, unknown> } & Record<string, unknown>;
}

/** The imported cluster of the production-shaped stages the tests synthesize. */
export const CLUSTER_ARN = 'arn:aws:kafka:eu-west-1:123456789012:cluster/prod-cluster/11111111-2222-3333-4444-555555555555-3';

/** The existing VPC such a cluster lives in: the functions go into its subnets (no lookup). */
export const EXISTING_NETWORK = {
  vpcId: 'vpc-0123456789abcdef0',
  subnetIds: ['subnet-0123456789abcdef1', 'subnet-0123456789abcdef2'],
  availabilityZones: ['eu-west-1a', 'eu-west-1b'],
};

/** The table the shipped case consumers share (their audit trail): every stage of cdk.json lists it. */
export const SHIPPED_SHARED_TABLES = { sharedTables: ['case_core.case_audit'] };

/** The stage keys of an existing cluster in its own VPC, to spread into a stage (with the shipped consumers' shared table). */
export const EXISTING_CLUSTER = { msk: { clusterArn: CLUSTER_ARN }, network: EXISTING_NETWORK, ...SHIPPED_SHARED_TABLES };

export const CDK_JSON = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')) as CdkJson;

export interface Synthesized {
  app: App;
  config: StageConfig;
  stacks: InboxStacks;
  stateful: Template;
  /** The platform stack's template. */
  platform: Template;
  /** Each consumer stack's template, by stack key. */
  consumerStacks: Record<string, Template>;
  /**
   * Everything but the stateful stack, as one template: the platform's resources and every
   * consumer stack's (logical ids are unique across them), for assertions that do not care
   * which of these stacks holds a resource.
   */
  stateless: Template;
}

/** The placements committed for the stages (cdk.json, context "consumerStacks"). */
export function recordedPlacements(stage: string): Record<string, string> {
  return ((CDK_JSON.context.consumerStacks ?? {}) as Record<string, Record<string, string>>)[stage] ?? {};
}

/**
 * Several templates' sections merged. A logical id that two stacks use for different
 * resources (each stack's dashboard) is kept once per stack, suffixed with the stack's index.
 */
export function mergeTemplates(templates: Template[]): Template {
  const merged: Record<string, Record<string, unknown>> = { Resources: {}, Parameters: {}, Outputs: {}, Conditions: {} };
  templates.forEach((t, i) => {
    const json = t.toJSON() as Record<string, Record<string, unknown> | undefined>;
    for (const section of Object.keys(merged)) {
      for (const [id, value] of Object.entries(json[section] ?? {})) {
        const seen = merged[section]![id];
        const clash = seen !== undefined && JSON.stringify(seen) !== JSON.stringify(value) && section !== 'Parameters';
        merged[section]![clash ? `${id}${i}` : id] = value;
      }
    }
  });
  return Template.fromJSON(merged, { skipCyclicalDependenciesCheck: true });
}

/** Build and synthesize one stage. `overrides` are merged over the stage's cdk.json context. */
export function synthesize(options: {
  stage?: string;
  overrides?: Record<string, unknown>;
  bundle: boolean;
  outdir?: string;
  /** The declared consumers (default: functions/consumers). */
  consumers?: readonly DeclaredConsumer[];
  /** The recorded placements (default: cdk.json's for the stage). */
  placements?: Record<string, string>;
}): Synthesized {
  const stage = options.stage ?? 'dev';
  const { stages, ...flags } = CDK_JSON.context;
  const raw = { ...(stages[stage] as Record<string, unknown>), ...options.overrides };
  const app = new App({
    context: { ...flags, ...(options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] }) },
    ...(options.outdir ? { outdir: options.outdir } : {}),
  });
  const config = parseStageConfig(stage, raw, options.consumers ?? CONSUMERS, options.placements ?? recordedPlacements(stage));
  const stacks = createInboxStacks(app, config);
  const platform = Template.fromStack(stacks.platform);
  const consumerStacks = Object.fromEntries(stacks.consumers.map((s) => [s.key, Template.fromStack(s)]));
  return {
    app,
    config,
    stacks,
    stateful: Template.fromStack(stacks.stateful),
    platform,
    consumerStacks,
    stateless: mergeTemplates([platform, ...Object.values(consumerStacks)]),
  };
}

/** cdk-nag AwsSolutions errors that nobody acknowledged, as "rule: construct paths". */
export function unacknowledgedNagErrors(app: App): string[] {
  return new AwsSolutionsChecks(app)
    .validateScope(app)
    .violations.filter((v) => v.severity === 'error')
    .map((v) => `${v.ruleName}: ${v.violatingResources.map((r) => r.constructPath).join(', ')}`);
}

export interface PolicyStatement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
}

export const actionsOf = (st: PolicyStatement): string[] => [st.Action].flat();

/** Every IAM statement attached (inline policies) to the role with this logical ID. */
export function statementsOfRole(template: Template, roleLogicalId: string): PolicyStatement[] {
  return Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((p) => (p.Properties.Roles as unknown[]).some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleLogicalId })))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as PolicyStatement[]);
}

export interface InboxFunctionView {
  description: string;
  environment: Record<string, unknown>;
  /** The IAM statements of the function's execution role. */
  statements: PolicyStatement[];
}

/** The project's functions (description "Kafka inbox…") with their environment and their role's statements. */
export function inboxFunctions(template: Template): InboxFunctionView[] {
  return Object.values(template.findResources('AWS::Lambda::Function'))
    .map((f) => f.Properties)
    .filter((p) => String(p.Description ?? '').startsWith('Kafka inbox'))
    .map((p) => ({
      description: String(p.Description),
      environment: p.Environment.Variables,
      statements: statementsOfRole(template, (p.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]),
    }));
}

/** The database users a set of statements may `rds-db:connect` as (the ARN's last segment), with the ARNs. */
export function databaseUsersOf(statements: PolicyStatement[]): { users: string[]; resources: string[] } {
  const resources = statements
    .filter((st) => st.Effect === 'Allow' && actionsOf(st).includes('rds-db:connect'))
    .flatMap((st) => [st.Resource].flat())
    .map((r) => JSON.stringify(r));
  const users = resources.map((r) => /\/([a-z_]+)"\]\]\}$|\/([a-z_]+)"$/.exec(r)).map((m) => m?.[1] ?? m?.[2] ?? '?');
  return { users: [...new Set(users)].sort(), resources };
}

/**
 * How a stateless template refers to one of the stateful stack's SSM parameters:
 * `{ Ref: <its CloudFormation parameter> }`, the parameter typed to resolve that name.
 */
export function statefulParameterRef(s: Pick<Synthesized, 'config' | 'stateless'>, key: StatefulParameter): { Ref: string } {
  const name = statefulParameterName(s.config, key);
  const parameters = (s.stateless.toJSON().Parameters ?? {}) as Record<string, { Type: string; Default?: string }>;
  const found = Object.entries(parameters).filter(([, p]) => p.Default === name && p.Type === 'AWS::SSM::Parameter::Value<String>');
  if (found.length !== 1) throw new Error(`the stateless template reads ${name} ${found.length} times`);
  return { Ref: found[0]![0] };
}

/** The value the stateful template writes to one of its SSM parameters. */
export function statefulParameterValue(s: Pick<Synthesized, 'config' | 'stateful'>, key: StatefulParameter): unknown {
  const name = statefulParameterName(s.config, key);
  const found = Object.values(s.stateful.findResources('AWS::SSM::Parameter')).filter((p) => p.Properties.Name === name);
  if (found.length !== 1) throw new Error(`the stateful template writes ${name} ${found.length} times`);
  return found[0]!.Properties.Value;
}

/** How a consumer stack's template refers to one of the platform stack's SSM parameters. */
export function platformParameterRef(s: Pick<Synthesized, 'config'>, template: Template, key: PlatformParameter): { Ref: string } {
  const name = platformParameterName(s.config, key);
  const parameters = (template.toJSON().Parameters ?? {}) as Record<string, { Type: string; Default?: string }>;
  const found = Object.entries(parameters).filter(([, p]) => p.Default === name && p.Type === 'AWS::SSM::Parameter::Value<String>');
  if (found.length !== 1) throw new Error(`the template reads ${name} ${found.length} times`);
  return { Ref: found[0]![0] };
}

/** The value the platform template writes to one of its SSM parameters. */
export function platformParameterValue(s: Pick<Synthesized, 'config' | 'platform'>, key: PlatformParameter): unknown {
  const name = platformParameterName(s.config, key);
  const found = Object.values(s.platform.findResources('AWS::SSM::Parameter')).filter((p) => p.Properties.Name === name);
  if (found.length !== 1) throw new Error(`the platform template writes ${name} ${found.length} times`);
  return found[0]!.Properties.Value;
}
