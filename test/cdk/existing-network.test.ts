/**
 * The example-existing-network stage of cdk.json, as a team with its own VPC and MSK cluster
 * deploys it: nothing of the network is created, every function runs in the given subnets,
 * the cluster's security group admits the outbox relay's on the IAM broker port, and the
 * templates pass cfn-lint (skipped, saying so, where cfn-lint is not installed).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MSK_IAM_PORT } from '../../cdk/stacks/stateful-stack';
import { CDK_JSON, statefulParameterRef, statefulParameterValue, synthesize, unacknowledgedNagErrors, type Synthesized } from './synth';

const STAGE = 'example-existing-network';
const declared = CDK_JSON.context.stages[STAGE] as {
  network: { vpcId: string; subnetIds: string[]; availabilityZones: string[] };
  msk: { clusterArn: string; securityGroupId: string };
};

type Resource = { Type: string; Properties: Record<string, any> };
const resourcesOf = (s: Synthesized, stack: 'stateful' | 'stateless', type: string) =>
  Object.entries(s[stack].findResources(type) as Record<string, Resource>);

let s: Synthesized;
let outdir: string;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), 'inbox-existing-network-'));
  s = synthesize({ stage: STAGE, bundle: false, outdir });
  s.app.synth();
});

afterAll(() => {
  rmSync(outdir, { recursive: true, force: true });
});

describe('an existing VPC and MSK cluster (example-existing-network)', () => {
  it("creates no VPC, subnet, route, NAT, flow log or endpoint: the network is the team's", () => {
    for (const type of [
      'AWS::EC2::VPC',
      'AWS::EC2::Subnet',
      'AWS::EC2::RouteTable',
      'AWS::EC2::NatGateway',
      'AWS::EC2::FlowLog',
      'AWS::EC2::VPCEndpoint',
      'AWS::MSK::ServerlessCluster',
    ]) {
      for (const stack of ['stateful', 'stateless'] as const) expect(resourcesOf(s, stack, type), `${stack} ${type}`).toEqual([]);
    }
    // Its security groups live in the team's VPC.
    const groups = resourcesOf(s, 'stateful', 'AWS::EC2::SecurityGroup');
    expect(groups.length).toBeGreaterThan(0);
    for (const [id, g] of groups) expect(g.Properties.VpcId, id).toBe(declared.network.vpcId);
  });

  it('runs every function in the given subnets, and the database and its rotation there too', () => {
    const functions = resourcesOf(s, 'stateless', 'AWS::Lambda::Function').filter(([, f]) => f.Properties.VpcConfig !== undefined);
    // ingest and worker per consumer, reaper, ops, migrations, outbox relay
    expect(functions).toHaveLength(s.config.consumers.length * 2 + 4);
    for (const [id, f] of functions) expect(f.Properties.VpcConfig.SubnetIds, id).toEqual(declared.network.subnetIds);
    const [[, subnetGroup]] = resourcesOf(s, 'stateful', 'AWS::RDS::DBSubnetGroup') as [[string, Resource]];
    expect(subnetGroup.Properties.SubnetIds).toEqual(declared.network.subnetIds);
    const [[, rotation]] = resourcesOf(s, 'stateful', 'AWS::Serverless::Application') as [[string, Resource]];
    expect(rotation.Properties.Parameters.vpcSubnetIds).toBe(declared.network.subnetIds.join(','));
    // Published for the stage's other stacks as given.
    expect(statefulParameterValue(s, 'vpcId')).toBe(declared.network.vpcId);
    expect(statefulParameterValue(s, 'subnetIds')).toBe(declared.network.subnetIds.join(','));
  });

  it("admits the Kafka-producing functions' security group to the cluster's on the IAM broker port, and only that", () => {
    const rules = resourcesOf(s, 'stateful', 'AWS::EC2::SecurityGroupIngress').filter(
      ([, r]) => r.Properties.GroupId === declared.msk.securityGroupId,
    );
    expect(rules.map(([, r]) => r.Properties)).toEqual([
      {
        Description: 'MSK IAM from the inbox outbox relay',
        IpProtocol: 'tcp',
        FromPort: MSK_IAM_PORT,
        ToPort: MSK_IAM_PORT,
        GroupId: declared.msk.securityGroupId,
        SourceSecurityGroupId: { 'Fn::GetAtt': [expect.stringMatching(/^KafkaClientSecurityGroup/), 'GroupId'] },
      },
    ]);
    const [kafkaClientId] = rules[0]![1].Properties.SourceSecurityGroupId['Fn::GetAtt'] as [string];
    expect(statefulParameterValue(s, 'kafkaClientSecurityGroupId')).toEqual({ 'Fn::GetAtt': [kafkaClientId, 'GroupId'] });
    // The Kafka producers are the functions with that group: the outbox relay, and nothing else.
    const producers = resourcesOf(s, 'stateless', 'AWS::Lambda::Function').filter(([, f]) =>
      JSON.stringify(f.Properties.VpcConfig?.SecurityGroupIds ?? []).includes(
        JSON.stringify(statefulParameterRef(s, 'kafkaClientSecurityGroupId')),
      ),
    );
    expect(producers.map(([, f]) => f.Properties.Description)).toEqual([expect.stringMatching(/^Kafka inbox outbox relay/)]);
    const writers = resourcesOf(s, 'stateless', 'AWS::IAM::Policy').filter(([, p]) =>
      JSON.stringify(p.Properties.PolicyDocument).includes('kafka-cluster:WriteData'),
    );
    expect(writers.map(([, p]) => p.Properties.Roles)).toEqual([[{ Ref: producers[0]![1].Properties.Role['Fn::GetAtt'][0] }]]);
  });

  it("maps the existing cluster by ARN, the mappings sharing the stage's poller group", () => {
    const mappings = resourcesOf(s, 'stateless', 'AWS::Lambda::EventSourceMapping');
    expect(mappings.length).toBe(s.config.consumers.flatMap((c) => c.topics).length);
    for (const [id, m] of mappings) {
      expect(m.Properties.EventSourceArn, id).toBe(declared.msk.clusterArn);
      expect(m.Properties.ProvisionedPollerConfig.PollerGroupName, id).toBe('kafka-inbox-example');
    }
  });

  it('passes cdk-nag AwsSolutions', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });

  it('passes cfn-lint with no error', (ctx) => {
    const version = spawnSync('cfn-lint', ['--version'], { encoding: 'utf8' });
    if (version.error !== undefined || version.status !== 0) {
      console.log(`cfn-lint is not installed here (${version.error?.message ?? version.stderr.trim()}): the templates were not linted`);
      ctx.skip();
    }
    const templates = readdirSync(outdir)
      .filter((f) => f.endsWith('.template.json'))
      .sort();
    expect(templates).toEqual([
      `KafkaInbox-${STAGE}-consumers-main.template.json`,
      `KafkaInbox-${STAGE}-stateful.template.json`,
      `KafkaInbox-${STAGE}-stateless.template.json`,
    ]);
    const result = spawnSync('cfn-lint', ['--format', 'json', ...templates.map((t) => join(outdir, t))], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(result.error).toBeUndefined();
    const findings = JSON.parse(result.stdout || '[]') as { Level: string; Rule: { Id: string }; Message: string; Filename: string }[];
    const errors = findings.filter((f) => f.Level === 'Error').map((f) => `${f.Rule.Id} ${f.Filename}: ${f.Message}`);
    console.log(
      `${version.stdout.trim()}: ${findings.length} findings, ${errors.length} errors (${[...new Set(findings.map((f) => `${f.Level} ${f.Rule.Id}`))].join(', ') || 'none'})`,
    );
    expect(errors).toEqual([]);
    // Exit status: 0 clean, 4 warnings only (bit 2 set means errors).
    expect(result.status! & 2).toBe(0);
  });
});
