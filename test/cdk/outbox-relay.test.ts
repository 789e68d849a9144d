/**
 * The outbox relay in the templates: its function and schedule, producer-only MSK IAM on
 * the declared outbox topic, the brokers looked up at deploy time (or given by the stage),
 * the dev cluster admitting it, the unpublished-age alarm and the outbox dashboard widgets.
 */
import { Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { RUNBOOK } from '../../cdk/constructs/alarms';
import { SLA_OBLIGATIONS_TOPIC } from '../../functions/consumers/case-sla';
import { MetricNames } from '../../functions/lib/metric-names';
import { queryBoundMs, SESSION_TIMEOUTS } from '../../functions/lib/session-settings';
import {
  actionsOf,
  CLUSTER_ARN,
  EXISTING_CLUSTER,
  statefulParameterRef,
  statementsOfRole,
  synthesize,
  unacknowledgedNagErrors,
  type Synthesized,
} from './synth';

type Resource = { Type: string; Properties?: Record<string, any> };

function relayOf(s: Synthesized): [string, Resource] {
  const found = Object.entries(s.stateless.findResources('AWS::Lambda::Function') as Record<string, Resource>).filter(([, f]) =>
    String(f.Properties!.Description).startsWith('Kafka inbox outbox relay'),
  );
  expect(found).toHaveLength(1);
  return found[0]!;
}

/** The kafka-cluster statements of every policy attached to a role. */
function kafkaStatements(s: Synthesized, functionRole: { 'Fn::GetAtt': [string, string] }): { Action: string[]; Resource: unknown }[] {
  return statementsOfRole(s.stateless, functionRole['Fn::GetAtt'][0])
    .map((st) => ({ Action: actionsOf(st), Resource: st.Resource }))
    .filter((st) => st.Action.some((a) => a.startsWith('kafka-cluster:')));
}

describe('the dev stage (a dev cluster created in the stage)', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesize({ bundle: false });
  });

  it('runs the relay every minute through the shared schedule group, with retries and a dead-letter queue', () => {
    const [id] = relayOf(s);
    s.stateless.hasResourceProperties('AWS::Scheduler::Schedule', {
      ScheduleExpression: 'rate(1 minute)',
      Target: Match.objectLike({
        Arn: { 'Fn::GetAtt': [id, 'Arn'] },
        RetryPolicy: Match.objectLike({ MaximumRetryAttempts: 2 }),
        DeadLetterConfig: { Arn: Match.anyValue() },
      }),
    });
  });

  it('gives the relay the brokers’ IAM string looked up at deploy time, a timeout above its margin, and no credential', () => {
    const [, relay] = relayOf(s);
    const env = relay.Properties!.Environment.Variables;
    const [lookupId] = Object.keys(s.stateless.findResources('Custom::AWS'));
    expect(env.KAFKA_BROKERS).toEqual({ 'Fn::GetAtt': [lookupId, 'BootstrapBrokerStringSaslIam'] });
    const lookup = s.stateless.findResources('Custom::AWS')[lookupId!]!;
    expect(JSON.stringify(lookup.Properties!.Create)).toContain('getBootstrapBrokers');
    expect(relay.Properties!.Timeout).toBeGreaterThan(Number(env.RELAY_SAFETY_MARGIN_MS) / 1000);
    expect(SESSION_TIMEOUTS.relay.statementMs).toBeLessThanOrEqual(Number(env.RELAY_SAFETY_MARGIN_MS));
    expect(Number(env.DB_QUERY_TIMEOUT_MS)).toBe(queryBoundMs('relay'));
    expect(Object.keys(env).some((k) => /PASSWORD|DATABASE_URL|SECRET_ACCESS_KEY/.test(k))).toBe(false);
  });

  it('lets the lookup call kafka:GetBootstrapBrokers on the cluster and nothing else', () => {
    const policies = Object.entries(s.stateless.findResources('AWS::IAM::Policy') as Record<string, Resource>)
      .filter(([id]) => id.startsWith('OutboxRelayBootstrapBrokers'))
      .map(([, p]) => p);
    expect(policies).toHaveLength(1);
    expect(policies[0]!.Properties!.PolicyDocument.Statement).toEqual([
      // The dev cluster's ARN, as the stateful stack publishes it.
      { Action: 'kafka:GetBootstrapBrokers', Effect: 'Allow', Resource: statefulParameterRef(s, 'kafkaClusterArn') },
    ]);
  });

  it('admits the Kafka client security group, the relay’s alone, to the dev cluster on the IAM port', () => {
    const rules = Object.values(s.stateful.findResources('AWS::EC2::SecurityGroupIngress') as Record<string, Resource>).filter(
      (r) => r.Properties!.Description === 'MSK IAM from the outbox relay',
    );
    expect(rules.map((r) => r.Properties)).toEqual([
      {
        Description: 'MSK IAM from the outbox relay',
        IpProtocol: 'tcp',
        FromPort: 9098,
        ToPort: 9098,
        GroupId: { 'Fn::GetAtt': [expect.stringMatching(/^DevKafkaSecurityGroup/), 'GroupId'] },
        SourceSecurityGroupId: { 'Fn::GetAtt': [expect.stringMatching(/^KafkaClientSecurityGroup/), 'GroupId'] },
      },
    ]);
    const groupsOf = (f: Resource) => f.Properties!.VpcConfig.SecurityGroupIds as unknown[];
    const kafkaClient = statefulParameterRef(s, 'kafkaClientSecurityGroupId');
    const [, relay] = relayOf(s);
    expect(groupsOf(relay)).toEqual([statefulParameterRef(s, 'functionSecurityGroupId'), kafkaClient]);
    const others = Object.values(s.stateless.findResources('AWS::Lambda::Function') as Record<string, Resource>).filter(
      (f) => f !== relay && f.Properties!.VpcConfig !== undefined,
    );
    expect(others.length).toBeGreaterThan(0);
    for (const f of others) expect(groupsOf(f)).not.toContainEqual(kafkaClient);
  });

  it('alarms per emitting consumer on the oldest unpublished age, breaching when the relay publishes nothing', () => {
    const statOf = (a: Resource) => a.Properties!.Metrics?.[0]?.MetricStat;
    const alarms = Object.values(s.stateless.findResources('AWS::CloudWatch::Alarm') as Record<string, Resource>).filter(
      (a) => statOf(a)?.Metric.MetricName === MetricNames.OutboxOldestUnpublishedAgeSeconds,
    );
    expect(alarms.map((a) => statOf(a).Metric.Dimensions.find((d: { Name: string }) => d.Name === 'ConsumerName').Value)).toEqual([
      'case-sla',
    ]);
    expect(statOf(alarms[0]!).Stat).toBe('Maximum');
    expect(alarms[0]!.Properties).toMatchObject({
      Threshold: s.config.alarms.outboxUnpublishedAgeSeconds,
      TreatMissingData: 'breaching',
      ComparisonOperator: 'GreaterThanThreshold',
    });
    expect(alarms[0]!.Properties!.AlarmDescription).toContain(`"Runbook: ${RUNBOOK.outboxUnpublishedAge}"`);
  });

  it('charts outbox depth, oldest unpublished age and the relay’s counts for the emitting consumer', () => {
    const body = JSON.stringify(s.stateless.findResources('AWS::CloudWatch::Dashboard'));
    for (const name of [
      MetricNames.OutboxDepth,
      MetricNames.OutboxOldestUnpublishedAgeSeconds,
      MetricNames.OutboxEventsPublished,
      MetricNames.OutboxPublishRefused,
    ]) {
      expect(body, name).toContain(`\\"${name}\\"`);
    }
    expect(body).toContain('case-sla: outbox');
    expect(body).not.toContain('case-projection: outbox');
  });
});

describe('an imported cluster with the brokers given by the stage', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesize({
      bundle: false,
      overrides: {
        account: '123456789012',
        region: 'eu-west-1',
        ...EXISTING_CLUSTER,
        relay: { bootstrapBrokers: 'b-1.prod.kafka.eu-west-1.amazonaws.com:9098,b-2.prod.kafka.eu-west-1.amazonaws.com:9098' },
      },
    });
  });

  it('takes the brokers as given: no lookup', () => {
    const [, relay] = relayOf(s);
    expect(relay.Properties!.Environment.Variables.KAFKA_BROKERS).toBe(
      'b-1.prod.kafka.eu-west-1.amazonaws.com:9098,b-2.prod.kafka.eu-west-1.amazonaws.com:9098',
    );
    s.stateless.resourceCountIs('Custom::AWS', 0);
  });

  it('grants the relay Connect and WriteDataIdempotently on the cluster, DescribeTopic and WriteData on the outbox topic only', () => {
    const [, relay] = relayOf(s);
    expect(kafkaStatements(s, relay.Properties!.Role)).toEqual([
      { Action: ['kafka-cluster:Connect', 'kafka-cluster:WriteDataIdempotently'], Resource: CLUSTER_ARN },
      {
        Action: ['kafka-cluster:DescribeTopic', 'kafka-cluster:WriteData'],
        Resource: `arn:aws:kafka:eu-west-1:123456789012:topic/prod-cluster/11111111-2222-3333-4444-555555555555-3/${SLA_OBLIGATIONS_TOPIC}`,
      },
    ]);
  });

  it('lets no other function write to Kafka', () => {
    const [, relay] = relayOf(s);
    const writers = Object.values(s.stateless.findResources('AWS::IAM::Policy') as Record<string, Resource>).filter((p) =>
      JSON.stringify(p.Properties!.PolicyDocument).includes('kafka-cluster:WriteData'),
    );
    // The function's Role is { Fn::GetAtt: [role, Arn] }; its policy names the role by Ref.
    const roleId = relay.Properties!.Role['Fn::GetAtt'][0];
    expect(writers.map((p) => p.Properties!.Roles)).toEqual([[{ Ref: roleId }]]);
  });

  it('passes cdk-nag AwsSolutions', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });
});

describe('a stage where no deployed consumer emits', () => {
  it('deploys no relay, no outbox alarm and no outbox widget', () => {
    const s = synthesize({ bundle: false, overrides: { consumers: { 'case-sla': { enabled: false } } } });
    const relays = Object.values(s.stateless.findResources('AWS::Lambda::Function') as Record<string, Resource>).filter((f) =>
      String(f.Properties!.Description).startsWith('Kafka inbox outbox relay'),
    );
    expect(relays).toEqual([]);
    expect(JSON.stringify(s.stateless.findResources('AWS::CloudWatch::Alarm'))).not.toContain(
      MetricNames.OutboxOldestUnpublishedAgeSeconds,
    );
    expect(JSON.stringify(s.stateless.findResources('AWS::CloudWatch::Dashboard'))).not.toContain(MetricNames.OutboxDepth);
  });
});
