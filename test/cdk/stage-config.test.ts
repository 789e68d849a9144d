/**
 * The stage configuration's validation, and a production-shaped stage (imported MSK cluster,
 * RDS Proxy, existing alarm topic, explicit environment) synthesized without bundling.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { parseStageConfig, reservedConcurrencyOf, StageConfigError } from '../../cdk/config';
import { CONSUMERS } from '../../functions/consumers/index';
import { SHIPPED_CONSUMERS } from './many-consumers';
import { runtimeRoles } from '../../functions/lib/database-roles';
import {
  actionsOf,
  CLUSTER_ARN,
  EXISTING_CLUSTER,
  EXISTING_NETWORK,
  databaseUsersOf,
  inboxFunctions,
  statefulParameterRef,
  statefulParameterValue,
  SHIPPED_SHARED_TABLES,
  statementsOfRole,
  synthesize,
  unacknowledgedNagErrors,
  type Synthesized,
} from './synth';

const TOPIC_ARN = 'arn:aws:sns:eu-west-1:123456789012:ops-alarms';

function configError(raw: unknown, declared = CONSUMERS): StageConfigError {
  try {
    parseStageConfig('test', raw, declared);
  } catch (error) {
    if (error instanceof StageConfigError) return error;
    throw error;
  }
  throw new Error('expected a StageConfigError');
}

describe('stage configuration', () => {
  it('fills every default from a minimal stage', () => {
    const config = parseStageConfig('test', EXISTING_CLUSTER, CONSUMERS);
    expect(config.consumers.map((c) => c.name)).toEqual(CONSUMERS.map((c) => c.name));
    expect(config.database.deletionProtection).toBe(true);
    expect(config.consumers[0]!.consumerGroupIds).toEqual({ [CONSUMERS[0]!.topics[0]!]: CONSUMERS[0]!.name });
  });

  it('requires exactly one of an imported cluster ARN and a dev cluster', () => {
    expect(configError({}).message).toContain('stages.test.msk: set exactly one of msk.clusterArn and msk.createDevCluster=true');
    expect(configError({ msk: { clusterArn: CLUSTER_ARN, createDevCluster: true } }).message).toContain('stages.test.msk:');
    expect(configError({ msk: { clusterArn: 'arn:aws:kafka:eu-west-1:1:cluster/x' } }).message).toContain(
      'stages.test.msk.clusterArn: must be an MSK cluster ARN',
    );
  });

  it('names every bad per-consumer setting with its path', () => {
    const message = configError({
      msk: { createDevCluster: true },
      consumers: {
        'case-sla': { minPollers: 5, maxPollers: 2 },
        'case-projection': { workerTimeoutSeconds: 295 },
        'no-such-consumer': { batchSize: 10 },
      },
    }).message;
    expect(message).toContain('stages.test.consumers.case-sla: minPollers must not exceed maxPollers');
    expect(message).toContain(
      'stages.test.consumers.case-projection: workerTimeoutSeconds + worker.safetyMarginSeconds must be below worker.leaseSeconds (300)',
    );
    expect(message).toContain('stages.test.consumers.no-such-consumer: no consumer declaration has this name');
  });

  it('refuses two mappings sharing a consumer group', () => {
    const message = configError({
      msk: { createDevCluster: true },
      consumers: { 'case-sla': { consumerGroupId: 'case-projection' } },
    }).message;
    expect(message).toContain('consumer group "case-projection" is also used by case-projection/');
  });

  it('sets the wake-up defaults, and lets a consumer change its concurrency or switch wake-ups off', () => {
    const config = parseStageConfig(
      'test',
      { ...EXISTING_CLUSTER, consumers: { 'case-sla': { workerMaxConcurrency: 8, workerReservedConcurrency: false, wakeUps: false } } },
      CONSUMERS,
    );
    const of = (name: string) => config.consumers.find((c) => c.name === name)!;
    expect(of('case-projection')).toMatchObject({ workerMaxConcurrency: 4, workerIdleSeconds: 10, wakeUps: true });
    // Reserving concurrency is a choice a stage makes (and declares the account's quota for).
    expect(of('case-projection').workerReservedConcurrency).toBe(false);
    expect(of('case-sla')).toMatchObject({ workerMaxConcurrency: 8, workerReservedConcurrency: false, wakeUps: false });
    expect(config.alarms).toMatchObject({ processingLatencyP50Ms: 5_000, processingLatencyP99Ms: 30_000, latencyMinSamples: 50 });
  });

  it("lets a consumer's entry override only what it names: the rest is the stage's consumerDefaults, not the built-in defaults", () => {
    const config = parseStageConfig(
      'test',
      {
        ...EXISTING_CLUSTER,
        consumerDefaults: { maxPollers: 8, workerMaxConcurrency: 6, pollerGroupName: 'shared' },
        consumers: { 'case-sla': { minPollers: 2 } },
      },
      CONSUMERS,
    );
    expect(config.consumers.find((c) => c.name === 'case-sla')).toMatchObject({
      minPollers: 2,
      maxPollers: 8,
      workerMaxConcurrency: 6,
      pollerGroupName: 'shared',
    });
  });

  it('refuses a reserved concurrency below the maximum concurrency: fanned-out workers would be throttled', () => {
    const message = configError({
      ...EXISTING_CLUSTER,
      consumers: { 'case-sla': { workerMaxConcurrency: 6, workerReservedConcurrency: 3 } },
    }).message;
    expect(message).toContain(
      'stages.test.consumers.case-sla: workerReservedConcurrency must be at least workerMaxConcurrency (6), or false',
    );
  });

  it('refuses a reaper timeout that leaves no time above its safety margin', () => {
    expect(configError({ msk: { createDevCluster: true }, reaper: { timeoutSeconds: 10 } }).message).toContain(
      'stages.test.reaper: timeoutSeconds must exceed reaper.safetyMarginSeconds (10)',
    );
  });

  it.each(['worker', 'reaper', 'relay'] as const)(
    'refuses a %s safety margin shorter than its role’s statement_timeout: a statement could outlive the invocation',
    (fn) => {
      expect(configError({ msk: { createDevCluster: true }, [fn]: { safetyMarginSeconds: 5 } }).message).toContain(
        `stages.test.${fn}.safetyMarginSeconds: at least 10 s, the ${fn} role's statement_timeout`,
      );
    },
  );

  it("refuses a consumer session bound the consumers' own functions could run past", () => {
    expect(
      configError({
        msk: { createDevCluster: true },
        consumerDefaults: { workerTimeoutSeconds: 200 },
        reaper: { consumerSessionBoundSeconds: 180 },
      }).message,
    ).toContain("stages.test.reaper.consumerSessionBoundSeconds: must exceed every consumer function's timeout (the longest is 200 s)");
  });

  it('refuses an out-of-range ESM setting', () => {
    expect(configError({ msk: { createDevCluster: true }, consumerDefaults: { maxRecordAgeSeconds: 30 } }).message).toContain(
      'stages.test.consumerDefaults.maxRecordAgeSeconds',
    );
  });
});

describe("a consumer's schema registry", () => {
  const GLUE = { type: 'glue' as const, registryArn: 'arn:aws:glue:eu-west-1:123456789012:registry/payments' };
  const CONFLUENT = {
    type: 'confluent' as const,
    url: 'https://registry.example.com:8081',
    authentication: 'CLIENT_CERTIFICATE_TLS_AUTH' as const,
    secretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:registry-client-AbC123',
  };
  const withRegistry = (registry: unknown, stage: Record<string, unknown> = {}) => ({
    ...EXISTING_CLUSTER,
    ...stage,
    consumers: { 'notification-service': { schemaRegistry: registry } },
  });
  const registryOf = (config: ReturnType<typeof parseStageConfig>, name: string) =>
    config.consumers.find((c) => c.name === name)!.schemaRegistry;

  it('fills the defaults (the value, converted to JSON) for that consumer only', () => {
    const config = parseStageConfig('test', withRegistry(GLUE), CONSUMERS);

    expect(registryOf(config, 'notification-service')).toEqual({ ...GLUE, validate: ['VALUE'], recordFormat: 'JSON' });
    expect(config.consumers.filter((c) => c.schemaRegistry !== undefined).map((c) => c.name)).toEqual(['notification-service']);
  });

  it("takes the declaration's registry, and lets the stage replace it", () => {
    const declared = CONSUMERS.map((c) =>
      c.name === 'case-sla' ? { ...c, schemaRegistry: { ...GLUE, recordFormat: 'SOURCE' as const } } : c,
    );
    const fromDeclaration = parseStageConfig('test', EXISTING_CLUSTER, declared);
    const replaced = parseStageConfig('test', { ...EXISTING_CLUSTER, consumers: { 'case-sla': { schemaRegistry: CONFLUENT } } }, declared);

    expect(registryOf(fromDeclaration, 'case-sla')).toEqual({ ...GLUE, validate: ['VALUE'], recordFormat: 'SOURCE' });
    expect(registryOf(replaced, 'case-sla')).toEqual({ ...CONFLUENT, validate: ['VALUE'], recordFormat: 'JSON' });
  });

  it("validates a declaration's registry like a stage's, naming the declaration", () => {
    const declared = CONSUMERS.map((c) =>
      c.name === 'case-sla'
        ? { ...c, schemaRegistry: { type: 'glue', registryArn: 'arn:aws:glue:eu-west-1:123456789012:schema/x/y' } as never }
        : c,
    );

    expect(() => parseStageConfig('test', EXISTING_CLUSTER, declared)).toThrow(
      'consumer declaration case-sla: schemaRegistry.registryArn: must be a Glue registry ARN',
    );
  });

  it.each([
    [
      'a schema ARN for a registry ARN',
      { ...GLUE, registryArn: 'arn:aws:glue:eu-west-1:123456789012:schema/payments/x' },
      'schemaRegistry.registryArn: must be a Glue registry ARN',
    ],
    ['a misspelt key', { type: 'glue', registryARN: GLUE.registryArn }, 'schemaRegistry: Unrecognized key: "registryARN"'],
    ['an unknown registry type', { type: 'avro' }, 'schemaRegistry.type: Invalid discriminator value'],
    ['an attribute twice', { ...GLUE, validate: ['VALUE', 'VALUE'] }, 'schemaRegistry.validate: each attribute once'],
    ['no attribute', { ...GLUE, validate: [] }, 'schemaRegistry.validate: Too small'],
    ['an unknown record format', { ...GLUE, recordFormat: 'AVRO' }, 'schemaRegistry.recordFormat: Invalid option'],
    ['a plain-http Confluent URL', { ...CONFLUENT, url: 'http://registry:8081' }, 'schemaRegistry.url: must be an https URL'],
    [
      'a secret ARN without its suffix',
      { ...CONFLUENT, secretArn: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:registry' },
      'schemaRegistry.secretArn: must be a complete Secrets Manager secret ARN',
    ],
  ])('refuses %s, with its path', (_name, registry, expected) => {
    const message = configError(withRegistry(registry)).message;

    expect(message).toContain(`stages.test.consumers.notification-service.${expected}`);
  });

  it("refuses a Glue registry outside the stage's account and region", () => {
    const message = configError(withRegistry(GLUE, { account: '210987654321', region: 'eu-west-1' })).message;

    expect(message).toContain(
      "stages.test.consumers.notification-service.schemaRegistry.registryArn: must be in the stage's account and region (210987654321, eu-west-1)",
    );
    expect(() => parseStageConfig('test', withRegistry(GLUE, { account: '123456789012', region: 'eu-west-1' }), CONSUMERS)).not.toThrow();
  });

  it('refuses a Confluent registry on a dev cluster, whose subnets cannot reach it', () => {
    const message = configError({
      msk: { createDevCluster: true },
      consumers: { 'notification-service': { schemaRegistry: CONFLUENT } },
    }).message;

    expect(message).toContain(
      "stages.test.consumers.notification-service.schemaRegistry: a Confluent registry needs a route from the cluster's subnets",
    );
  });
});

describe('a production-shaped stage', () => {
  let s: Synthesized;

  beforeAll(() => {
    s = synthesize({
      bundle: false,
      overrides: {
        account: '123456789012',
        region: 'eu-west-1',
        ...EXISTING_CLUSTER,
        database: { rdsProxy: true, deletionProtection: false },
        alarms: { snsTopicArn: TOPIC_ARN },
        consumers: { 'case-sla': { topics: ['regulatory.case.events.v1', 'regulatory.case.replays.v1'], minPollers: 2, maxPollers: 4 } },
      },
    });
  });

  it('maps the imported cluster by ARN, one consumer group per topic of a multi-topic consumer', () => {
    const mappings = Object.values(s.stateless.findResources('AWS::Lambda::EventSourceMapping')).map((m) => m.Properties);
    expect(mappings.every((m) => m.EventSourceArn === CLUSTER_ARN)).toBe(true);
    const sla = mappings.filter((m) => String(m.AmazonManagedKafkaEventSourceConfig.ConsumerGroupId).startsWith('case-sla'));
    expect(sla.map((m) => [m.Topics[0], m.AmazonManagedKafkaEventSourceConfig.ConsumerGroupId, m.ProvisionedPollerConfig])).toEqual([
      // The dev stage's poller group (consumerDefaults) holds for a consumer's own poller counts too.
      [
        'regulatory.case.events.v1',
        'case-sla.regulatory.case.events.v1',
        { MinimumPollers: 2, MaximumPollers: 4, PollerGroupName: 'kafka-inbox-dev' },
      ],
      [
        'regulatory.case.replays.v1',
        'case-sla.regulatory.case.replays.v1',
        { MinimumPollers: 2, MaximumPollers: 4, PollerGroupName: 'kafka-inbox-dev' },
      ],
    ]);
  });

  it('scopes MSK IAM to the literal topic and group ARNs of the imported cluster', () => {
    const json = JSON.stringify(s.stateless.findResources('AWS::IAM::Policy'));
    expect(json).toContain(
      '"arn:aws:kafka:eu-west-1:123456789012:topic/prod-cluster/11111111-2222-3333-4444-555555555555-3/regulatory.case.replays.v1"',
    );
    expect(json).toContain(
      '"arn:aws:kafka:eu-west-1:123456789012:group/prod-cluster/11111111-2222-3333-4444-555555555555-3/case-sla.regulatory.case.replays.v1"',
    );
    s.stateful.resourceCountIs('AWS::MSK::ServerlessCluster', 0);
  });

  it('routes the functions through RDS Proxy without prepared statements, and migrations straight to the cluster', () => {
    s.stateful.resourceCountIs('AWS::RDS::DBProxy', 1);
    s.stateful.hasResourceProperties('AWS::RDS::DBProxy', { RequireTLS: true });
    expect(statefulParameterValue(s, 'connectHost')).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/Proxy/), 'Endpoint'] });
    const functions = Object.values(s.stateless.findResources('AWS::Lambda::Function'))
      .map((f) => f.Properties)
      .filter((p) => String(p.Description ?? '').startsWith('Kafka inbox'));
    for (const p of functions) {
      const env = p.Environment.Variables;
      if (String(p.Description).includes('migrations')) {
        expect(env.DB_HOST).toBeUndefined();
        expect(env.DB_PREPARE).toBe('true');
        expect(env.NODE_EXTRA_CA_CERTS).toBe('/var/runtime/ca-cert.pem');
      } else {
        // The proxy's endpoint, through the parameter the stateful stack writes it to.
        expect(env.DB_HOST).toEqual(statefulParameterRef(s, 'connectHost'));
        expect(env.DB_PREPARE).toBe('false');
        // The proxy's certificate is under Amazon's public roots: Node's own store verifies it.
        expect(env.NODE_EXTRA_CA_CERTS).toBeUndefined();
        expect(env.DB_SSL).toBe('verify-full');
      }
    }
  });

  it('authenticates end to end with IAM through the proxy: no secret on it, its role connects as the runtime users only', () => {
    const [proxy] = Object.values(s.stateful.findResources('AWS::RDS::DBProxy')).map((p) => p.Properties);
    expect(proxy.DefaultAuthScheme).toBe('IAM_AUTH');
    expect(proxy.Auth ?? []).toEqual([]);
    const proxyRoleId = (proxy.RoleArn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    const statements = statementsOfRole(s.stateful, proxyRoleId);
    expect(statements.flatMap(actionsOf).filter((a) => a.startsWith('secretsmanager:'))).toEqual([]);
    const { users, resources } = databaseUsersOf(statements);
    expect(users).toEqual(runtimeRoles(CONSUMERS).sort());
    for (const r of resources) expect(r).toMatch(/dbuser:.*DBClusterResourceId/);
  });

  it("gives each runtime function rds-db:connect on the proxy's resource id for its user, and the migration function none", () => {
    for (const f of inboxFunctions(s.stateless)) {
      const { users, resources } = databaseUsersOf(f.statements);
      if (f.description.includes('migrations')) {
        expect(users).toEqual([]);
        continue;
      }
      expect(users).toEqual([f.environment.DB_IAM_USER]);
      // The resource id the stateful stack publishes for the endpoint the functions use.
      for (const r of resources)
        expect(r).toContain(
          `dbuser:",${JSON.stringify(statefulParameterRef(s, 'connectResourceId'))},"/${String(f.environment.DB_IAM_USER)}"`,
        );
    }
    // prx-<id>: the last segment of the proxy's ARN.
    expect(JSON.stringify(statefulParameterValue(s, 'connectResourceId'))).toMatch(
      /^\{"Fn::Select":\[6,\{"Fn::Split":\[":",\{"Fn::GetAtt":\["[A-Za-z0-9]*Proxy[A-Za-z0-9]*","DBProxyArn"\]\}\]\}\]\}$/,
    );
  });

  it('sends alarms to the existing topic instead of creating one', () => {
    s.stateless.resourceCountIs('AWS::SNS::Topic', 0);
    // Every alarm that notifies; a worker's heartbeat and pause alarms notify through their composite.
    const alarms = [
      ...Object.values(s.stateless.findResources('AWS::CloudWatch::Alarm')),
      ...Object.values(s.stateless.findResources('AWS::CloudWatch::CompositeAlarm')),
    ].filter((a) => !/Notifies (nobody|through)/.test(String(a.Properties.AlarmDescription)));
    expect(alarms.length).toBeGreaterThan(0);
    for (const a of alarms) expect(a.Properties.AlarmActions).toEqual([TOPIC_ARN]);
  });

  it('deploys to the configured environment', () => {
    expect(s.stacks.stateful.account).toBe('123456789012');
    expect(s.stacks.platform.region).toBe('eu-west-1');
    s.stateful.hasResourceProperties('AWS::RDS::DBCluster', { DeletionProtection: false });
  });

  it('passes cdk-nag AwsSolutions too', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });
});

describe("a team's own account: network, routes to the brokers, quotas, poller groups", () => {
  const BROKERS = 'b-1.prod.kafka.eu-west-1.amazonaws.com:9098,b-2.prod.kafka.eu-west-1.amazonaws.com:9098';

  it('imports an existing VPC only with its private subnets and the zone of each, and changes nothing of it', () => {
    expect(configError({ ...EXISTING_CLUSTER, network: { vpcId: EXISTING_NETWORK.vpcId } }).message).toContain(
      'stages.test.network.subnetIds: required with network.vpcId: the private subnets to use',
    );
    expect(configError({ ...EXISTING_CLUSTER, network: { ...EXISTING_NETWORK, availabilityZones: ['eu-west-1a'] } }).message).toContain(
      'stages.test.network.availabilityZones: required with network.vpcId: the availability zone of each subnet, in the same order',
    );
    expect(configError({ ...EXISTING_CLUSTER, network: { ...EXISTING_NETWORK, cidr: '10.1.0.0/16' } }).message).toContain(
      'stages.test.network.cidr: only for a created VPC',
    );
    expect(configError({ ...EXISTING_CLUSTER, network: { ...EXISTING_NETWORK, subnetId: 'subnet-0123456789abcdef1' } }).message).toContain(
      'stages.test.network: Unrecognized key: "subnetId"',
    );
    expect(parseStageConfig('test', EXISTING_CLUSTER, CONSUMERS).network).toEqual({
      kind: 'existing',
      ...EXISTING_NETWORK,
      interfaceEndpoints: [],
    });
  });

  it('asks for the zones of a created VPC when account and region are set, and then synthesizes with no lookup', () => {
    const stage = { account: '123456789012', region: 'eu-west-1', msk: { createDevCluster: true } };
    expect(configError(stage).message).toContain(
      'stages.test.network.availabilityZones: required when account and region are set (synth would look them up with credentials): e.g. ["eu-west-1a", "eu-west-1b"]',
    );
    expect(configError({ ...stage, network: { availabilityZones: ['eu-west-1a', 'us-east-1b'] } }).message).toContain(
      'stages.test.network.availabilityZones: not in eu-west-1: us-east-1b',
    );
    const s = synthesize({ bundle: false, overrides: { ...stage, network: { availabilityZones: ['eu-west-1a', 'eu-west-1c'] } } });
    expect(s.app.synth().manifest.missing ?? []).toEqual([]);
    const zones = Object.values(s.stateful.findResources('AWS::EC2::Subnet')).map((subnet) => subnet.Properties.AvailabilityZone);
    expect(zones).toEqual(['eu-west-1a', 'eu-west-1c']);
  });

  it('refuses an existing cluster the relay could not reach from a VPC the stack creates, unless the stage names brokers it reaches', () => {
    const stage = { msk: { clusterArn: CLUSTER_ARN }, ...SHIPPED_SHARED_TABLES };
    expect(configError(stage).message).toContain(
      "stages.test.network: the outbox relay produces to msk.clusterArn from the stage's subnets, and a VPC this stack creates has no route to it",
    );
    expect(() => parseStageConfig('test', { ...stage, relay: { bootstrapBrokers: BROKERS } }, CONSUMERS)).not.toThrow();
    // No consumer emits: no relay, nothing produces to the cluster.
    expect(() => parseStageConfig('test', { ...stage, consumers: { 'case-sla': { enabled: false } } }, CONSUMERS)).not.toThrow();
    expect(configError({ msk: { createDevCluster: true, securityGroupId: 'sg-0123456789abcdef0' } }).message).toContain(
      "stages.test.msk: securityGroupId is the existing cluster's (msk.clusterArn)",
    );
  });

  it('reserves no concurrency by default, and checks a reservation against the declared account quota', () => {
    const reserving = { ...EXISTING_CLUSTER, consumerDefaults: { workerMaxConcurrency: 4, workerReservedConcurrency: true } };
    expect(parseStageConfig('test', EXISTING_CLUSTER, SHIPPED_CONSUMERS).consumers.map(reservedConcurrencyOf)).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(configError(reserving, SHIPPED_CONSUMERS).message).toContain(
      'stages.test.quotas.lambdaConcurrentExecutions: required when workers reserve concurrency (case-projection 5, case-sla 5, notification-service 5)',
    );
    expect(configError({ ...reserving, quotas: { lambdaConcurrentExecutions: 50 } }, SHIPPED_CONSUMERS).message).toContain(
      'stages.test.quotas.lambdaConcurrentExecutions: the workers reserve 15 (case-projection 5, case-sla 5, notification-service 5) and Lambda keeps 100 unreserved: the account needs a quota of at least 115, it has 50. Set workerReservedConcurrency to false (or lower it) for some consumers',
    );
    // Just enough; and a consumer that opts out leaves room.
    expect(() => parseStageConfig('test', { ...reserving, quotas: { lambdaConcurrentExecutions: 115 } }, SHIPPED_CONSUMERS)).not.toThrow();
    expect(() =>
      parseStageConfig(
        'test',
        { ...reserving, quotas: { lambdaConcurrentExecutions: 110 }, consumers: { 'case-sla': { workerReservedConcurrency: false } } },
        SHIPPED_CONSUMERS,
      ),
    ).not.toThrow();

    const s = synthesize({
      bundle: false,
      overrides: { consumerDefaults: { workerReservedConcurrency: true }, quotas: { lambdaConcurrentExecutions: 1000 } },
    });
    const workers = Object.values(s.stateless.findResources('AWS::Lambda::Function')).filter((f) =>
      String(f.Properties.Description).startsWith('Kafka inbox worker'),
    );
    expect(workers.map((w) => w.Properties.ReservedConcurrentExecutions)).toEqual(
      s.config.consumers.map((c) => c.workerMaxConcurrency + 1),
    );
  });

  it("keeps a poller group within Lambda's limits", () => {
    const topics = Array.from({ length: 11 }, (_, i) => `regulatory.case.events.v${i + 1}`);
    const message = configError(
      {
        ...EXISTING_CLUSTER,
        consumerDefaults: { pollerGroupName: 'shared', maxPollers: 200 },
        consumers: { 'case-sla': { topics } },
      },
      SHIPPED_CONSUMERS,
    ).message;
    expect(message).toContain('stages.test: poller group "shared" adds up to 2600 maxPollers; Lambda allows 2000 per group');
    expect(configError({ ...EXISTING_CLUSTER, consumerDefaults: { pollerGroupName: 'a b' } }).message).toContain(
      'stages.test.consumerDefaults.pollerGroupName: must be 1-128 characters of [A-Za-z0-9_-]',
    );
  });
});
