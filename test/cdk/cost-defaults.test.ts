/**
 * The defaults that keep a stage cheap: no endpoint nothing calls, endpoints that admit only
 * the functions, and a retention (from the stage) on every log group the stacks create or
 * cause — their own, the helper functions' that Lambda creates on first run, the database's
 * exported log, the flow logs.
 */
import { describe, expect, it } from 'vitest';
import { DATABASE_CLUSTER_LOGICAL_ID } from '../../cdk/stacks/stateful-stack';
import { CDK_JSON, synthesize, type Synthesized } from './synth';

type Resource = { Type: string; Properties: Record<string, any> };
const resources = (template: Synthesized['stateful'], type: string) =>
  Object.entries(template.findResources(type) as Record<string, Resource>);

/** The `/aws/lambda/<function>` log groups a Custom::LogRetention sets, and the other groups it sets, rendered as JSON. */
function retentionsSet(template: Synthesized['stateful']): Map<string, number> {
  return new Map(
    resources(template, 'Custom::LogRetention').map(([, r]) => [
      JSON.stringify(r.Properties.LogGroupName),
      r.Properties.RetentionInDays as number,
    ]),
  );
}

/** The retention each Lambda function of a template logs with, by logical id. */
function functionRetentions(template: Synthesized['stateful']): Record<string, number | undefined> {
  const groups = Object.fromEntries(
    resources(template, 'AWS::Logs::LogGroup').map(([id, g]) => [id, g.Properties.RetentionInDays as number | undefined]),
  );
  const set = retentionsSet(template);
  return Object.fromEntries(
    resources(template, 'AWS::Lambda::Function').map(([id, f]) => {
      const own = f.Properties.LoggingConfig?.LogGroup as { Ref: string } | undefined;
      if (own !== undefined) return [id, groups[own.Ref]];
      // Lambda's default group, /aws/lambda/<name>: a log-retention resource names it.
      const byDefault = set.get(JSON.stringify({ 'Fn::Join': ['', ['/aws/lambda/', { Ref: id }]] }));
      // CDK's log-retention provider keeps its own group one day (it sets that itself).
      if (byDefault === undefined && id.startsWith('LogRetention')) return [id, 1];
      return [id, byDefault];
    }),
  );
}

describe.each([
  ['dev', {}],
  ['example-existing-network', {}],
  ['example-prod', {}],
])('the %s stage', (stage, overrides) => {
  const s = synthesize({ stage, bundle: false, overrides });
  const days = s.config.observability.logRetentionDays;

  it("gives every function of both stacks, the project's and the helpers', a log retention from the stage", () => {
    for (const template of [s.stateful, s.stateless]) {
      const retentions = functionRetentions(template);
      expect(Object.keys(retentions).length).toBeGreaterThan(0);
      for (const [id, retention] of Object.entries(retentions)) expect(retention, id).toBe(id.startsWith('LogRetention') ? 1 : days);
    }
  });

  it("sets a retention on every log group it creates, the exported PostgreSQL log and the rotation function's", () => {
    for (const template of [s.stateful, s.stateless]) {
      for (const [id, g] of resources(template, 'AWS::Logs::LogGroup')) expect(g.Properties.RetentionInDays, id).toBeGreaterThan(0);
    }
    const set = retentionsSet(s.stateful);
    expect(set.get(JSON.stringify({ 'Fn::Join': ['', ['/aws/rds/cluster/', { Ref: DATABASE_CLUSTER_LOGICAL_ID }, '/postgresql']] }))).toBe(
      s.config.database.logRetentionDays,
    );
    const [[, rotation]] = resources(s.stateful, 'AWS::Serverless::Application') as [[string, Resource]];
    expect(set.get(JSON.stringify(`/aws/lambda/${rotation.Properties.Parameters.functionName as string}`))).toBe(days);
  });

  it("creates only the endpoints the functions call, each admitting the functions' security group (and Secrets Manager the rotation's)", () => {
    const interfaceEndpoints = resources(s.stateful, 'AWS::EC2::VPCEndpoint').filter(
      ([, e]) => e.Properties.VpcEndpointType === 'Interface',
    );
    const services = interfaceEndpoints
      .map(([, e]) => JSON.stringify(e.Properties.ServiceName).replace(/.*\.([a-z-]+)"\]\]\}$|.*\.([a-z-]+)"$/, '$1$2'))
      .sort();
    expect(services).toEqual([...s.config.network.interfaceEndpoints].sort());
    expect(services).not.toContain('sts');
    const ingress = resources(s.stateful, 'AWS::EC2::SecurityGroupIngress');
    for (const [id, endpoint] of interfaceEndpoints) {
      const groups = (endpoint.Properties.SecurityGroupIds as { 'Fn::GetAtt': [string, string] }[]).map((g) => g['Fn::GetAtt'][0]);
      const sources = ingress
        .filter(([, r]) => groups.includes(r.Properties.GroupId?.['Fn::GetAtt']?.[0]))
        .map(([, r]) => r.Properties.SourceSecurityGroupId['Fn::GetAtt'][0] as string);
      const expected = JSON.stringify(endpoint.Properties.ServiceName).includes('secretsmanager')
        ? [/^FunctionSecurityGroup/, /^SecretRotationSecurityGroup/]
        : [/^FunctionSecurityGroup/];
      expect(sources.sort(), id).toEqual(expected.map((e) => expect.stringMatching(e)));
    }
  });
});

it('creates no interface endpoint in an existing VPC unless the stage asks, then only those', () => {
  const network = (CDK_JSON.context.stages['example-existing-network'] as { network: object }).network;
  const asked = synthesize({
    stage: 'example-existing-network',
    bundle: false,
    overrides: { network: { ...network, interfaceEndpoints: ['secretsmanager'] } },
  });
  expect(resources(asked.stateful, 'AWS::EC2::VPCEndpoint').map(([, e]) => JSON.stringify(e.Properties.ServiceName))).toEqual([
    expect.stringContaining('secretsmanager'),
  ]);
});
