/**
 * A consumer with a schema registry: the example stage of cdk.json (a Glue registry for
 * notification-service), a Confluent registry given by stage overrides, and the Glue
 * endpoint a dev cluster's pollers need. Synthesized without bundling: only templates are read.
 */
import { readFileSync } from 'node:fs';
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { RUNBOOK } from '../../cdk/constructs/alarms';
import { CONSUMERS } from '../../functions/consumers/index';
import { EXISTING_CLUSTER, CDK_JSON, synthesize, unacknowledgedNagErrors, type Synthesized } from './synth';

type Resources = Record<string, { Type: string; Properties: Record<string, any> }>;
type Statement = { Action: string | string[]; Resource: unknown; Condition?: unknown };

const EXAMPLE = CDK_JSON.context.stages['example-schema-registry'] as {
  consumers: { 'notification-service': { schemaRegistry: { registryArn: string } } };
};
const REGISTRY_ARN = EXAMPLE.consumers['notification-service'].schemaRegistry.registryArn;
const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:confluent/case-registry-AbC123';
const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';

const mappings = (t: Template) => Object.values(t.findResources('AWS::Lambda::EventSourceMapping') as Resources).map((m) => m.Properties);
const groupOf = (m: Record<string, any>) => m.AmazonManagedKafkaEventSourceConfig.ConsumerGroupId as string;

/** Every policy statement of the stack, with the logical id of its policy. */
function statements(t: Template): Array<Statement & { policy: string }> {
  return Object.entries(t.findResources('AWS::IAM::Policy') as Resources).flatMap(([policy, p]) =>
    (p.Properties.PolicyDocument.Statement as Statement[]).map((st) => ({ ...st, policy })),
  );
}
const actionsOf = (st: Statement) => [st.Action].flat();

describe('the example-schema-registry stage (cdk.json)', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesize({ stage: 'example-schema-registry', bundle: false });
  });

  it("puts SchemaRegistryConfig with the declared URI, format and validation on notification-service's mapping only", () => {
    const all = mappings(s.stateless);
    expect(all).toHaveLength(CONSUMERS.flatMap((c) => c.topics).length);
    const withRegistry = all.filter((m) => m.AmazonManagedKafkaEventSourceConfig.SchemaRegistryConfig !== undefined);
    expect(withRegistry.map((m) => [groupOf(m), m.Topics, m.AmazonManagedKafkaEventSourceConfig.SchemaRegistryConfig])).toEqual([
      [
        'notification-service',
        ['payment.completed'],
        { SchemaRegistryURI: REGISTRY_ARN, EventRecordFormat: 'JSON', SchemaValidationConfigs: [{ Attribute: 'VALUE' }] },
      ],
    ]);
    // Schema registries need provisioned mode; every mapping has it, this one included.
    expect(withRegistry[0]!.ProvisionedPollerConfig).toEqual({ MinimumPollers: 1, MaximumPollers: 2 });
  });

  it("grants Glue reads on that registry and its schemas to notification-service's ingest role only", () => {
    const glue = statements(s.stateless).filter((st) => actionsOf(st).some((a) => a.startsWith('glue:')));
    expect(new Set(glue.map((st) => st.policy)).size).toBe(1);
    expect(glue[0]!.policy).toMatch(/^NotificationServiceIngestFunctionServiceRoleDefaultPolicy/);
    expect(glue.map(({ Action, Resource }) => ({ Action, Resource }))).toEqual([
      { Action: 'glue:GetRegistry', Resource: REGISTRY_ARN },
      {
        Action: 'glue:GetSchemaVersion',
        Resource: [
          REGISTRY_ARN,
          {
            'Fn::Sub': [
              'arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:schema/${registryName}/*',
              { registryName: 'payments' },
            ],
          },
        ],
      },
    ]);
    expect(JSON.stringify(glue)).not.toContain('"*"');
  });

  it("alarms on the mapping's SchemaRegistryErrorCount for that consumer only, naming the runbook section", () => {
    const alarms = Object.values(s.stateless.findResources('AWS::CloudWatch::Alarm') as Resources).filter((a) =>
      String(a.Properties.AlarmDescription).includes(`"Runbook: ${RUNBOOK.schemaRegistryErrors}"`),
    );
    expect(alarms).toHaveLength(1);
    const alarm = alarms[0]!.Properties;
    expect(alarm.AlarmDescription).toMatch(/^notification-service: /);
    expect(alarm.Threshold).toBe(0);
    expect(alarm.ComparisonOperator).toBe('GreaterThanThreshold');
    const metrics = (alarm.Metrics as Array<{ Id: string; Expression?: string; MetricStat?: any }>).filter((m) => m.MetricStat);
    expect(
      metrics.map((m) => [m.MetricStat.Metric.Namespace, m.MetricStat.Metric.MetricName, m.MetricStat.Metric.Dimensions[0].Name]),
    ).toEqual([['AWS/Lambda', 'SchemaRegistryErrorCount', 'EventSourceMappingUUID']]);
    const [mappingId] = Object.entries(s.stateless.findResources('AWS::Lambda::EventSourceMapping') as Resources).find(
      ([, m]) => groupOf(m.Properties) === 'notification-service',
    )!;
    expect(metrics[0]!.MetricStat.Metric.Dimensions[0].Value).toEqual({ Ref: mappingId });
    const runbook = readFileSync(new URL('../../docs/runbooks.md', import.meta.url), 'utf8');
    expect(runbook).toContain(`## Runbook: ${RUNBOOK.schemaRegistryErrors}\n`);
  });

  it("tells that consumer's ingest function its registry (SCHEMA_REGISTRY, no secret) and no other function", () => {
    const functions = Object.values(s.stateless.findResources('AWS::Lambda::Function') as Resources);
    const withRegistry = functions.filter((f) => f.Properties.Environment?.Variables?.SCHEMA_REGISTRY !== undefined);
    expect(withRegistry.map((f) => f.Properties.Environment.Variables.CONSUMER_NAME)).toEqual(['notification-service']);
    expect(JSON.parse(withRegistry[0]!.Properties.Environment.Variables.SCHEMA_REGISTRY)).toEqual({
      type: 'glue',
      registryArn: REGISTRY_ARN,
      validate: ['VALUE'],
      recordFormat: 'JSON',
    });
  });

  it('alarms when the ingest function hands records back for want of the registry, naming the runbook section', () => {
    const alarms = Object.values(s.stateless.findResources('AWS::CloudWatch::Alarm') as Resources).filter((a) =>
      String(a.Properties.AlarmDescription).includes(`"Runbook: ${RUNBOOK.schemaRegistryUnavailable}"`),
    );
    expect(alarms).toHaveLength(1);
    const alarm = alarms[0]!.Properties;
    expect(alarm.AlarmDescription).toMatch(/^notification-service: /);
    expect([alarm.Threshold, alarm.ComparisonOperator]).toEqual([0, 'GreaterThanThreshold']);
    const stats = (alarm.Metrics as Array<{ MetricStat?: any }>).filter((m) => m.MetricStat).map((m) => m.MetricStat);
    expect(stats.map((m) => [m.Metric.Namespace, m.Metric.MetricName, m.Metric.Dimensions, m.Stat])).toEqual([
      [
        'KafkaInbox',
        'SchemaRegistryUnavailable',
        [
          { Name: 'ConsumerName', Value: 'notification-service' },
          { Name: 'service', Value: 'kafka-inbox' },
        ],
        'Sum',
      ],
    ]);
    const runbook = readFileSync(new URL('../../docs/runbooks.md', import.meta.url), 'utf8');
    expect(runbook).toContain(`## Runbook: ${RUNBOOK.schemaRegistryUnavailable}\n`);
  });

  it('charts the schema registry errors on the dashboard', () => {
    expect(JSON.stringify(s.stateless.findResources('AWS::CloudWatch::Dashboard'))).toContain('\\"SchemaRegistryErrorCount\\"');
  });

  it('passes cdk-nag AwsSolutions', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });
});

describe('a Confluent registry set by a stage', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesize({
      bundle: false,
      overrides: {
        ...EXISTING_CLUSTER,
        consumers: {
          'case-projection': {
            schemaRegistry: {
              type: 'confluent',
              url: 'https://psrc-abc12.eu-west-1.aws.confluent.cloud',
              authentication: 'BASIC_AUTH',
              secretArn: SECRET_ARN,
              secretKmsKeyArn: KEY_ARN,
              validate: ['KEY', 'VALUE'],
              recordFormat: 'SOURCE',
            },
          },
        },
      },
    });
  });

  it("configures the URL, the secret as BASIC_AUTH, both attributes and the SOURCE format on that consumer's mapping only", () => {
    const withRegistry = mappings(s.stateless).filter((m) => m.AmazonManagedKafkaEventSourceConfig.SchemaRegistryConfig !== undefined);
    expect(withRegistry.map((m) => [groupOf(m), m.AmazonManagedKafkaEventSourceConfig.SchemaRegistryConfig])).toEqual([
      [
        'case-projection',
        {
          SchemaRegistryURI: 'https://psrc-abc12.eu-west-1.aws.confluent.cloud',
          EventRecordFormat: 'SOURCE',
          AccessConfigs: [{ Type: 'BASIC_AUTH', URI: SECRET_ARN }],
          SchemaValidationConfigs: [{ Attribute: 'KEY' }, { Attribute: 'VALUE' }],
        },
      ],
    ]);
  });

  it("grants reading exactly that secret, and decrypting with its key only through Secrets Manager, to case-projection's ingest role only", () => {
    const reads = statements(s.stateless).filter((st) => JSON.stringify(st.Resource).includes(SECRET_ARN));
    expect(reads).toHaveLength(1);
    expect(reads[0]!.policy).toMatch(/^CaseProjectionIngestFunctionServiceRoleDefaultPolicy/);
    expect(actionsOf(reads[0]!).sort()).toEqual(['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue']);
    // The same statement also reads the database secret (an import): the registry's is named literally, no wildcard.
    expect([reads[0]!.Resource].flat().filter((r) => typeof r === 'string')).toEqual([SECRET_ARN]);
    const decrypt = statements(s.stateless).filter((st) => JSON.stringify(st.Resource) === JSON.stringify(KEY_ARN));
    expect(decrypt).toHaveLength(1);
    expect(decrypt[0]!.policy).toMatch(/^CaseProjectionIngestFunctionServiceRoleDefaultPolicy/);
    expect(actionsOf(decrypt[0]!)).toEqual(['kms:Decrypt']);
    expect(JSON.stringify(decrypt[0]!.Condition)).toContain('secretsmanager.');
    expect(statements(s.stateless).some((st) => actionsOf(st).some((a) => a.startsWith('glue:')))).toBe(false);
  });

  it('passes cdk-nag AwsSolutions', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });
});

describe('a Glue registry on a dev cluster', () => {
  it("adds a Glue interface endpoint that admits only the dev cluster's pollers and the functions", () => {
    const s = synthesize({
      bundle: false,
      overrides: { consumers: { 'case-sla': { schemaRegistry: { type: 'glue', registryArn: REGISTRY_ARN } } } },
    });

    const endpoints = Object.entries(s.stateful.findResources('AWS::EC2::VPCEndpoint') as Resources).filter(([, e]) =>
      JSON.stringify(e.Properties.ServiceName).includes('.glue'),
    );
    expect(endpoints).toHaveLength(1);
    const [, endpoint] = endpoints[0]!;
    expect(endpoint.Properties.PrivateDnsEnabled).toBe(true);
    const [endpointGroup] = endpoint.Properties.SecurityGroupIds.map((g: { 'Fn::GetAtt': [string, string] }) => g['Fn::GetAtt'][0]);
    const ingress = Object.values(s.stateful.findResources('AWS::EC2::SecurityGroupIngress') as Resources)
      .map((r) => r.Properties)
      .filter((p) => p.GroupId['Fn::GetAtt'][0] === endpointGroup);
    expect(ingress.map((p) => [p.FromPort, p.SourceSecurityGroupId['Fn::GetAtt'][0]])).toEqual([
      [443, expect.stringMatching(/^DevKafkaSecurityGroup/)],
      [443, expect.stringMatching(/^FunctionSecurityGroup/)],
    ]);
    // The defaults were filled in: the value, converted to JSON.
    expect(s.config.consumers.find((c) => c.name === 'case-sla')!.schemaRegistry).toEqual({
      type: 'glue',
      registryArn: REGISTRY_ARN,
      validate: ['VALUE'],
      recordFormat: 'JSON',
    });
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });
});
