/**
 * Stage changes that deploy. `cdk deploy --all` updates the stateful stack first, while the
 * stateless stack of the previous configuration is still deployed: CloudFormation refuses
 * that update if it removes an export the deployed stack imports. For each toggle, the
 * stage is synthesized before and after, and the deployed (before) stateless stack must
 * find everything it reads in the updated (after) stateful stack: its exports, and the SSM
 * parameters the stacks share instead.
 */
import { describe, expect, it } from 'vitest';
import { STATEFUL_PARAMETERS, statefulParameterName } from '../../cdk/stacks/stage-references';
import { CDK_JSON, CLUSTER_ARN, synthesize, type Synthesized } from './synth';

/** Fn::ImportValue names anywhere in a template. */
function importsOf(template: unknown): string[] {
  const found: string[] = [];
  JSON.stringify(template, (key, value: unknown) => {
    if (key === 'Fn::ImportValue') found.push(JSON.stringify(value));
    return value;
  });
  return found;
}

function exportsOf(template: { Outputs?: Record<string, { Export?: { Name: unknown } }> }): string[] {
  return Object.values(template.Outputs ?? {}).flatMap((o) => (o.Export === undefined ? [] : [JSON.stringify(o.Export.Name)]));
}

/** The stateful stack's SSM parameter names the platform and consumer stacks resolve at deploy time. */
function parametersReadBy(s: Synthesized): string[] {
  const parameters = (s.stateless.toJSON().Parameters ?? {}) as Record<string, { Type: string; Default?: string }>;
  return Object.values(parameters)
    .filter((p) => p.Type.startsWith('AWS::SSM::Parameter::Value'))
    .map((p) => p.Default!)
    .filter((name) => name.startsWith(`/${s.config.stackPrefix}/${s.config.stage}/stateful/`))
    .sort();
}

function parametersWrittenBy(s: Synthesized): string[] {
  return Object.values(s.stateful.findResources('AWS::SSM::Parameter'))
    .map((p) => p.Properties.Name as string)
    .sort();
}

const toggle = (stage: string, before: Record<string, unknown>, after: Record<string, unknown>) => ({
  before: synthesize({ stage, bundle: false, overrides: before }),
  after: synthesize({ stage, bundle: false, overrides: after }),
});

/** A stage's own database settings with RDS Proxy set. */
const withProxy = (stage: string, rdsProxy: boolean) => ({
  database: { ...((CDK_JSON.context.stages[stage] as { database?: object }).database ?? {}), rdsProxy },
});

const TOGGLES: [string, () => { before: Synthesized; after: Synthesized }][] = [
  ['dev: RDS Proxy turned on', () => toggle('dev', withProxy('dev', false), withProxy('dev', true))],
  ['dev: RDS Proxy turned off', () => toggle('dev', withProxy('dev', true), withProxy('dev', false))],
  [
    'dev: from the dev cluster to an existing one (reached through brokers the stage names)',
    () =>
      toggle(
        'dev',
        {},
        {
          msk: { clusterArn: CLUSTER_ARN },
          relay: { bootstrapBrokers: 'b-1.prod.kafka.eu-west-1.amazonaws.com:9098,b-2.prod.kafka.eu-west-1.amazonaws.com:9098' },
        },
      ),
  ],
  [
    'example-existing-network: RDS Proxy turned on',
    () => toggle('example-existing-network', withProxy('example-existing-network', false), withProxy('example-existing-network', true)),
  ],
  ['example-prod: RDS Proxy turned off', () => toggle('example-prod', withProxy('example-prod', true), withProxy('example-prod', false))],
  [
    'an existing VPC: from a dev cluster in it to the existing cluster',
    () => toggle('example-existing-network', { msk: { createDevCluster: true } }, {}),
  ],
];

describe.each(TOGGLES)('%s', (_name, build) => {
  it('removes nothing the deployed stateless stack reads: no export is imported, every parameter it reads is still written', () => {
    const { before, after } = build();
    // The toggle changes the stateful stack (or there would be nothing to prove).
    expect(JSON.stringify(after.stateful.toJSON())).not.toBe(JSON.stringify(before.stateful.toJSON()));

    const available = new Set(exportsOf(after.stateful.toJSON() as never));
    expect(importsOf(before.stateless.toJSON()).filter((name) => !available.has(name))).toEqual([]);
    // No export at all: a later change cannot run into one either.
    expect(importsOf(before.stateless.toJSON())).toEqual([]);
    expect(exportsOf(after.stateful.toJSON() as never)).toEqual([]);

    const written = new Set(parametersWrittenBy(after));
    const read = parametersReadBy(before);
    expect(read.length).toBeGreaterThan(0);
    expect(read.filter((name) => !written.has(name))).toEqual([]);
    // The same names before and after, whatever the toggle.
    expect(parametersWrittenBy(after)).toEqual(parametersWrittenBy(before));
    expect(parametersWrittenBy(after)).toEqual(
      Object.keys(STATEFUL_PARAMETERS)
        .map((key) => statefulParameterName(after.config, key as keyof typeof STATEFUL_PARAMETERS))
        .sort(),
    );
  });
});
