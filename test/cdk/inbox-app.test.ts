/**
 * The synthesized templates of the dev stage (cdk.json), bundled exactly as `cdk deploy`
 * would bundle them. Synthesized once for the whole file: bundling is the slow part.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNBOOK } from '../../cdk/constructs/alarms';
import { seriesOf, widgetsOf } from '../../cdk/constructs/dashboard-widgets';
import { DATABASE_CLUSTER_LOGICAL_ID, MASTER_SECRET_ROTATION_DAYS } from '../../cdk/stacks/stateful-stack';
import { CONSUMERS } from '../../functions/consumers/index';
import { MARKER, markerConsumer } from './fixtures/marker-consumer';
import { MetricNames } from '../../functions/lib/metric-names';
import { DatabaseRoles, ingestRoleOf, relayRoleOf, runtimeRoles, workerRoleOf } from '../../functions/lib/database-roles';
import { QUERY_GRACE_MS, SESSION_TIMEOUTS } from '../../functions/lib/session-settings';
import {
  actionsOf,
  databaseUsersOf,
  inboxFunctions,
  platformParameterRef,
  platformParameterValue,
  statefulParameterRef,
  statefulParameterValue,
  synthesize,
  unacknowledgedNagErrors,
  type Synthesized,
} from './synth';

let s: Synthesized;
let outdir: string;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), 'inbox-cdk-'));
  s = synthesize({ bundle: true, outdir });
  s.app.synth();
});

afterAll(() => {
  rmSync(outdir, { recursive: true, force: true });
});

type Resources = Record<string, { Type: string; Properties?: Record<string, any>; DeletionPolicy?: string }>;
const resourcesOf = (t: Template, type: string): Resources => t.findResources(type) as Resources;

describe('ingest: one MSK event-source mapping per consumer topic', () => {
  it('maps every declared consumer topic with partial batch responses, provisioned pollers, bounded retries and a destination', () => {
    const mappings = Object.values(resourcesOf(s.stateless, 'AWS::Lambda::EventSourceMapping'));
    const expected = CONSUMERS.flatMap((c) => c.topics.map((topic) => ({ consumer: c.name, topic })));
    expect(mappings).toHaveLength(expected.length);
    for (const { consumer, topic } of expected) {
      const mapping = mappings.find(
        (m) => m.Properties!.Topics[0] === topic && m.Properties!.AmazonManagedKafkaEventSourceConfig?.ConsumerGroupId === consumer,
      );
      expect(mapping, `${consumer} ← ${topic}`).toBeDefined();
      const p = mapping!.Properties!;
      expect(p.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
      // The dev stage's mappings share one poller group instead of a minimum of pollers each.
      expect(p.ProvisionedPollerConfig).toEqual({ MinimumPollers: 1, MaximumPollers: 2, PollerGroupName: 'kafka-inbox-dev' });
      expect(p.MaximumRetryAttempts).toBeGreaterThanOrEqual(0);
      expect(p.MaximumRetryAttempts).toBeLessThan(10_001);
      // Records of any age: nothing is discarded for its age (test/cdk/record-age.test.ts).
      expect(p).not.toHaveProperty('MaximumRecordAgeInSeconds');
      expect(p.BisectBatchOnFunctionError).toBe(true);
      // The platform's encrypted on-failure bucket, through its SSM parameter, never a literal ARN.
      expect(p.DestinationConfig.OnFailure.Destination).toEqual(platformParameterRef(s, s.stateless, 'failedRecordsBucketArn'));
      expect(p.BatchSize).toBe(s.config.consumers.find((c) => c.name === consumer)!.batchSize);
      expect(p.StartingPosition).toBe('TRIM_HORIZON');
    }
  });

  it('sends exhausted records to an encrypted, private, TLS-only bucket that outlives the stack', () => {
    const buckets = resourcesOf(s.stateless, 'AWS::S3::Bucket');
    expect(Object.keys(buckets)).toHaveLength(1);
    const [id, bucket] = Object.entries(buckets)[0]!;
    expect(bucket.DeletionPolicy).toBe('Retain');
    expect(bucket.Properties!.BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault.SSEAlgorithm).toBe(
      'AES256',
    );
    expect(bucket.Properties!.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
    // The consumer stacks find it through the platform's parameter.
    expect(platformParameterValue(s, 'failedRecordsBucketArn')).toEqual({ 'Fn::GetAtt': [id, 'Arn'] });
    for (const m of Object.values(resourcesOf(s.stateless, 'AWS::Lambda::EventSourceMapping'))) {
      expect(m.Properties!.DestinationConfig.OnFailure.Destination).toEqual(platformParameterRef(s, s.stateless, 'failedRecordsBucketArn'));
    }
  });

  it('names the on-failure bucket in the stack output the runbook points to', () => {
    const runbook = readFileSync(new URL('../../docs/runbooks.md', import.meta.url), 'utf8');
    expect(runbook).toContain('stack output of the stateless stack, `FailedRecordsBucketName`');
    const [bucketId] = Object.keys(resourcesOf(s.stateless, 'AWS::S3::Bucket')).filter((id) => id.startsWith('FailedRecords'));
    s.stateless.hasOutput('FailedRecordsBucketName', { Value: { Ref: bucketId } });
  });

  it('validates against no schema registry when no consumer declares one: no SchemaRegistryConfig, no Glue access or endpoint', () => {
    expect(s.config.consumers.every((c) => c.schemaRegistry === undefined)).toBe(true);
    for (const m of Object.values(resourcesOf(s.stateless, 'AWS::Lambda::EventSourceMapping'))) {
      expect(m.Properties!.AmazonManagedKafkaEventSourceConfig.SchemaRegistryConfig).toBeUndefined();
    }
    expect(JSON.stringify(resourcesOf(s.stateless, 'AWS::IAM::Policy'))).not.toContain('glue:');
    expect(JSON.stringify(resourcesOf(s.stateful, 'AWS::EC2::VPCEndpoint'))).not.toContain('.glue');
  });

  it('grants MSK IAM access on the cluster, the consumer topics and its groups only', () => {
    // The outbox relay's producer grants: their own test below.
    const policies = Object.entries(resourcesOf(s.stateless, 'AWS::IAM::Policy'))
      .filter(([id]) => !id.startsWith('OutboxRelay'))
      .map(([, p]) => p);
    const statements = policies.flatMap(
      (p) => p.Properties!.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[],
    );
    const kafka = statements.filter((st) => [st.Action].flat().some((a) => a.startsWith('kafka-cluster:')));
    const actions = new Set(kafka.flatMap((st) => [st.Action].flat()).filter((a) => a.startsWith('kafka-cluster:')));
    expect([...actions].sort()).toEqual(
      [
        'kafka-cluster:AlterGroup',
        'kafka-cluster:Connect',
        'kafka-cluster:DescribeClusterDynamicConfiguration',
        'kafka-cluster:DescribeGroup',
        'kafka-cluster:DescribeTopic',
        'kafka-cluster:ReadData',
      ].sort(),
    );
    for (const st of kafka) {
      const resource = JSON.stringify(st.Resource);
      expect(resource).not.toContain('"*"');
      const acts = [st.Action].flat();
      // The dev cluster's prefixes, built once by the stateful stack and read as parameters.
      if (acts.includes('kafka-cluster:ReadData'))
        expect(resource).toContain(JSON.stringify(statefulParameterRef(s, 'kafkaTopicArnPrefix')));
      if (acts.includes('kafka-cluster:AlterGroup'))
        expect(resource).toContain(JSON.stringify(statefulParameterRef(s, 'kafkaGroupArnPrefix')));
    }
  });
});

describe('schedules', () => {
  it('runs each consumer worker and the reaper every minute, with retries and a dead-letter queue', () => {
    const schedules = Object.values(resourcesOf(s.stateless, 'AWS::Scheduler::Schedule'));
    const functions = resourcesOf(s.stateless, 'AWS::Lambda::Function');
    const targetOf = (fnLogicalId: string) =>
      schedules.find((sc) => JSON.stringify(sc.Properties!.Target.Arn) === JSON.stringify({ 'Fn::GetAtt': [fnLogicalId, 'Arn'] }));
    const scheduled = Object.entries(functions).filter(([, f]) => /^Kafka inbox (worker|reaper)/.test(f.Properties!.Description));
    expect(scheduled).toHaveLength(CONSUMERS.length + 1);
    for (const [id, f] of scheduled) {
      const schedule = targetOf(id);
      expect(schedule, f.Properties!.Description).toBeDefined();
      expect(schedule!.Properties!.ScheduleExpression).toBe('rate(1 minute)');
      expect(schedule!.Properties!.Target.RetryPolicy.MaximumRetryAttempts).toBe(2);
      expect(schedule!.Properties!.Target.DeadLetterConfig.Arn).toBeDefined();
    }
  });

  it('gives the reaper a timeout above its safety margin, so a run does work', () => {
    const [reaper, ...others] = Object.values(resourcesOf(s.stateless, 'AWS::Lambda::Function')).filter((f) =>
      String(f.Properties!.Description).startsWith('Kafka inbox reaper'),
    );
    expect(others).toHaveLength(0);
    const margin = Number(reaper!.Properties!.Environment.Variables.REAPER_SAFETY_MARGIN_MS) / 1000;
    expect(margin).toBeGreaterThan(0);
    expect(reaper!.Properties!.Timeout).toBeGreaterThan(margin);
    // Consumer roles' sessions past this are ended: above every function's timeout, by default Lambda's longest.
    expect(reaper!.Properties!.Environment.Variables.REAPER_SESSION_BOUND_SECONDS).toBe('900');
  });

  it('gives each worker a timeout that ends well inside its lease', () => {
    const workers = Object.values(resourcesOf(s.stateless, 'AWS::Lambda::Function')).filter((f) =>
      String(f.Properties!.Description).startsWith('Kafka inbox worker'),
    );
    expect(workers).toHaveLength(CONSUMERS.length);
    for (const w of workers) {
      const lease = Number(w.Properties!.Environment.Variables.LEASE_SECONDS);
      const margin = Number(w.Properties!.Environment.Variables.WORKER_SAFETY_MARGIN_MS) / 1000;
      expect(w.Properties!.Timeout + margin).toBeLessThan(lease);
      // A statement cannot run past the margin kept before the deadline: the role's statement_timeout.
      expect(SESSION_TIMEOUTS.worker.statementMs / 1000).toBeLessThanOrEqual(margin);
      // The client waits a little longer than that for an answer before it takes the connection for dead.
      expect(Number(w.Properties!.Environment.Variables.DB_QUERY_TIMEOUT_MS)).toBe(SESSION_TIMEOUTS.worker.statementMs + QUERY_GRACE_MS);
      expect(w.Properties!.Environment.Variables.DB_STATEMENT_TIMEOUT_MS).toBeUndefined();
    }
  });
});

describe('wake-ups', () => {
  const functions = () => Object.entries(resourcesOf(s.stateless, 'AWS::Lambda::Function'));
  const workerOf = (name: string) => functions().find(([, f]) => f.Properties!.Description === `Kafka inbox worker: ${name}`)!;
  const ingestOf = (name: string) =>
    functions().find(([, f]) => String(f.Properties!.Description).startsWith(`Kafka inbox ingest: ${name} `))!;
  const roleOf = (f: Resources[string]) => (f.Properties!.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
  const invokeGrants = () =>
    Object.values(resourcesOf(s.stateless, 'AWS::IAM::Policy')).flatMap((p) =>
      (p.Properties!.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[])
        .filter((st) => actionsOf(st as never).includes('lambda:InvokeFunction'))
        .map((st) => ({ roles: p.Properties!.Roles as unknown[], actions: actionsOf(st as never), resource: st.Resource })),
    );

  it("name each consumer's worker in its ingest function's environment", () => {
    for (const c of s.config.consumers) {
      const [workerId] = workerOf(c.name);
      const [, ingest] = ingestOf(c.name);
      expect(ingest.Properties!.Environment.Variables.WORKER_FUNCTION_NAME, c.name).toEqual({ Ref: workerId });
    }
  });

  it("let an ingest function invoke its own consumer's worker and nothing else; a worker, itself only", () => {
    const grants = invokeGrants();
    for (const c of s.config.consumers) {
      const [workerId, worker] = workerOf(c.name);
      const [, ingest] = ingestOf(c.name);
      const byIngest = grants.filter((g) => JSON.stringify(g.roles) === JSON.stringify([{ Ref: roleOf(ingest) }]));
      expect(byIngest, c.name).toEqual([
        { roles: [{ Ref: roleOf(ingest) }], actions: ['lambda:InvokeFunction'], resource: { 'Fn::GetAtt': [workerId, 'Arn'] } },
      ]);
      const byWorker = grants.filter((g) => JSON.stringify(g.roles) === JSON.stringify([{ Ref: roleOf(worker) }]));
      expect(byWorker, c.name).toEqual([
        { roles: [{ Ref: roleOf(worker) }], actions: ['lambda:InvokeFunction'], resource: { 'Fn::GetAtt': [workerId, 'Arn'] } },
      ]);
    }
    // Nobody else invokes a function but ops, which wakes a worker on resume and hands failed
    // batches to an ingest function (reingest-failed), each by tag (the schedules' roles are
    // the scheduler's, not a function's).
    const functionRoles = new Set(functions().map(([, f]) => roleOf(f)));
    const others = grants.filter((g) => g.roles.some((r) => functionRoles.has((r as { Ref: string }).Ref)));
    expect(others).toHaveLength(s.config.consumers.length * 2 + 2);
  });

  it('reserve no concurrency unless the stage chooses to, and neither retry nor keep an old asynchronous invocation', () => {
    const configs = Object.values(resourcesOf(s.stateless, 'AWS::Lambda::EventInvokeConfig'));
    for (const c of s.config.consumers) {
      const [workerId, worker] = workerOf(c.name);
      // The consumer's slots bound its workers; a reservation is the stage's choice (quotas).
      expect(worker.Properties!.ReservedConcurrentExecutions, c.name).toBeUndefined();
      const env = worker.Properties!.Environment.Variables;
      expect(env).toMatchObject({
        WORKER_MAX_CONCURRENCY: String(c.workerMaxConcurrency),
        WORKER_IDLE_MS: String(c.workerIdleSeconds * 1000),
        WAKE_UPS: 'true',
      });
      const config = configs.filter((ic) => JSON.stringify(ic.Properties!.FunctionName) === JSON.stringify({ Ref: workerId }));
      expect(config, c.name).toHaveLength(1);
      expect(config[0]!.Properties).toMatchObject({ MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60, Qualifier: '$LATEST' });
    }
  });

  it('can be switched off per consumer: no environment, no grant, the schedule alone', () => {
    const off = synthesize({
      bundle: false,
      overrides: { consumers: { 'case-sla': { wakeUps: false, workerReservedConcurrency: false } } },
    });
    const fns = Object.values(resourcesOf(off.stateless, 'AWS::Lambda::Function'));
    const ingest = fns.find((f) => String(f.Properties!.Description).startsWith('Kafka inbox ingest: case-sla '))!;
    const worker = fns.find((f) => f.Properties!.Description === 'Kafka inbox worker: case-sla')!;
    expect(ingest.Properties!.Environment.Variables.WORKER_FUNCTION_NAME).toBeUndefined();
    expect(worker.Properties!.Environment.Variables.WAKE_UPS).toBe('false');
    expect(worker.Properties!.ReservedConcurrentExecutions).toBeUndefined();
    const invokers = Object.values(resourcesOf(off.stateless, 'AWS::IAM::Policy')).filter((p) =>
      (p.Properties!.PolicyDocument.Statement as { Action: string | string[] }[]).some((st) =>
        actionsOf(st as never).includes('lambda:InvokeFunction'),
      ),
    );
    const roles = JSON.stringify(invokers.map((p) => p.Properties!.Roles));
    expect(roles).not.toContain((ingest.Properties!.Role as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0]);
    expect(roles).not.toContain((worker.Properties!.Role as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0]);
  });
});

describe('functions', () => {
  it("are arm64 on Node.js 22 or newer, in the VPC, with verified TLS and never a password (the master secret's ARN for the migration function only)", () => {
    const functions = Object.values(resourcesOf(s.stateless, 'AWS::Lambda::Function')).filter((f) =>
      String(f.Properties!.Description ?? '').startsWith('Kafka inbox'),
    );
    // ingest + worker per consumer, reaper, ops, migrations, outbox relay
    expect(functions).toHaveLength(CONSUMERS.length * 2 + 4);
    for (const f of functions) {
      const p = f.Properties!;
      expect(p.Architectures).toEqual(['arm64']);
      expect(Number(/^nodejs(\d+)\.x$/.exec(p.Runtime)![1])).toBeGreaterThanOrEqual(22);
      expect(p.VpcConfig.SubnetIds.length).toBeGreaterThan(0);
      const env = p.Environment.Variables;
      expect(env.DB_SSL).toBe('verify-full');
      // Directly to the cluster: the RDS certificate authorities are in the runtime's Amazon bundle.
      expect(env.NODE_EXTRA_CA_CERTS).toBe('/var/runtime/ca-cert.pem');
      if (String(p.Description).includes('migrations')) {
        // A reference to the stateful stack's generated secret, never a literal value.
        expect(env.DB_SECRET_ARN).toEqual(statefulParameterRef(s, 'masterSecretArn'));
        expect(env.DB_IAM_USER).toBeUndefined();
      } else {
        expect(env.DB_SECRET_ARN).toBeUndefined();
        expect(env.DB_IAM_USER).toMatch(/^inbox_/);
        expect(env.DB_NAME).toBe(s.config.database.databaseName);
        expect(env.DB_HOST).toEqual(statefulParameterRef(s, 'connectHost'));
      }
      expect(p.Environment.Variables.POWERTOOLS_SERVICE_NAME).toBe(s.config.observability.serviceName);
      expect(p.Environment.Variables.METRICS_NAMESPACE).toBe(s.config.observability.metricsNamespace);
      expect(Object.keys(p.Environment.Variables).some((k) => /PASSWORD|DATABASE_URL/.test(k))).toBe(false);
    }
  });

  it('let the ops function touch schedules only as its commands do: read and update the worker schedules, create ops-replay-* ones', () => {
    const policies = Object.values(resourcesOf(s.stateless, 'AWS::IAM::Policy'));
    const statements = policies.flatMap(
      (p) => p.Properties!.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown }[],
    );
    const granted = statements
      .map((st) => ({ actions: [st.Action].flat().filter((a) => a.startsWith('scheduler:')), resource: JSON.stringify(st.Resource) }))
      .filter((g) => g.actions.length > 0);
    const onReplaySchedules = granted.filter((g) => g.resource.includes('/ops-replay-*'));
    expect(onReplaySchedules.flatMap((g) => g.actions)).toEqual(['scheduler:CreateSchedule']);
    const elsewhere = granted.filter((g) => !g.resource.includes('/ops-replay-*')).flatMap((g) => g.actions);
    expect([...new Set(elsewhere)].sort()).toEqual(['scheduler:GetSchedule', 'scheduler:UpdateSchedule']);
  });

  it("let the ops function switch the ingest mappings its stage's consumer stacks tag, and find them in the consumer directory", () => {
    const mappingIds = Object.keys(resourcesOf(s.stateless, 'AWS::Lambda::EventSourceMapping')).sort();
    expect(mappingIds).toHaveLength(CONSUMERS.flatMap((c) => c.topics).length);
    const policies = Object.values(resourcesOf(s.platform, 'AWS::IAM::Policy'));
    const statements = policies.flatMap(
      (p) => p.Properties!.PolicyDocument.Statement as { Action: string | string[]; Resource: unknown; Condition?: unknown }[],
    );
    const switching = statements.filter((st) => [st.Action].flat().some((a) => a.endsWith('EventSourceMapping')));
    expect(switching).toHaveLength(1);
    expect([switching[0]!.Action].flat().sort()).toEqual(['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping']);
    // Any mapping of the account, on the condition that it carries this stage's ingest tag.
    expect(JSON.stringify(switching[0]!.Resource)).toContain(':event-source-mapping:*');
    expect(switching[0]!.Condition).toEqual({ StringEquals: { 'aws:ResourceTag/kafka-inbox:ingest': 'KafkaInbox-dev' } });
    for (const id of mappingIds) {
      expect(resourcesOf(s.stateless, 'AWS::Lambda::EventSourceMapping')[id]!.Properties!.Tags).toContainEqual({
        Key: 'kafka-inbox:ingest',
        Value: 'KafkaInbox-dev',
      });
    }

    // Each consumer's directory entry names its mappings; ops's environment names only the directory.
    const entries = Object.values(resourcesOf(s.stateless, 'AWS::SSM::Parameter')).filter((p) =>
      String(p.Properties!.Name).startsWith('/KafkaInbox/dev/consumers/'),
    );
    expect(entries.map((e) => e.Properties!.Name).sort()).toEqual(CONSUMERS.map((c) => `/KafkaInbox/dev/consumers/${c.name}`).sort());
    const values = JSON.stringify(entries.map((e) => e.Properties!.Value));
    for (const id of mappingIds) expect(values).toContain(id);
    const ops = Object.values(resourcesOf(s.platform, 'AWS::Lambda::Function')).find((f) =>
      String(f.Properties!.Description).startsWith('Kafka inbox operator commands'),
    )!;
    expect(Object.keys(ops.Properties!.Environment.Variables)).not.toContain('INGEST_MAPPINGS');
    expect(ops.Properties!.Environment.Variables.CONSUMER_DIRECTORY).toBe('/KafkaInbox/dev/consumers/');
  });

  it("set the log level through Lambda's logging configuration (JSON, application level of the stage), not an environment variable", () => {
    const functions = Object.entries(resourcesOf(s.stateless, 'AWS::Lambda::Function')).filter(([, f]) =>
      /^Kafka inbox/.test(f.Properties!.Description ?? ''),
    );
    // ingest and worker per consumer; reaper, ops, migrations, outbox relay
    expect(functions.length).toBe(CONSUMERS.length * 2 + 4);
    for (const [id, f] of functions) {
      expect(f.Properties!.LoggingConfig, id).toMatchObject({ LogFormat: 'JSON', ApplicationLogLevel: s.config.observability.logLevel });
      const env = Object.keys(f.Properties!.Environment.Variables as Record<string, unknown>);
      expect(
        env.filter((k) => /LOG_LEVEL/.test(k)),
        id,
      ).toEqual([]);
    }
  });

  it('apply the migrations through a trigger before any function that uses the inbox exists', () => {
    const triggers = resourcesOf(s.platform, 'Custom::Trigger');
    expect(Object.keys(triggers)).toHaveLength(1);
    const triggerId = Object.keys(triggers)[0]!;
    // The consumer stacks deploy after the platform stack, so after its trigger ran.
    for (const stack of s.stacks.consumers) expect(stack.dependencies).toContain(s.stacks.platform);
    const all = s.platform.toJSON().Resources as Record<string, { Type: string; DependsOn?: string[] }>;
    for (const type of ['AWS::Lambda::EventSourceMapping', 'AWS::Scheduler::Schedule']) {
      for (const [id, r] of Object.entries(all).filter(([, r]) => r.Type === type)) {
        expect(r.DependsOn ?? [], id).toContain(triggerId);
      }
    }
  });
});

/** The database role each function must connect as, by its description: an ingest's, a worker's and a relay's is its consumer's own. */
function expectedRole(description: string): string | undefined {
  if (description.includes('migrations')) return undefined;
  const ingest = /^Kafka inbox ingest: (\S+) \((deferred|inline)\)$/.exec(description);
  if (ingest !== null) return ingestRoleOf({ name: ingest[1]! });
  const worker = /^Kafka inbox worker: (\S+)$/.exec(description);
  if (worker !== null) return workerRoleOf({ name: worker[1]! });
  if (description.startsWith('Kafka inbox reaper')) return DatabaseRoles.reaper;
  if (description.startsWith('Kafka inbox operator')) return DatabaseRoles.ops;
  const relay = /^Kafka inbox outbox relay: (\S+)$/.exec(description);
  if (relay !== null) return relayRoleOf({ name: relay[1]! });
  throw new Error(`no expected role for ${description}`);
}

describe('database access in IAM', () => {
  it('lets no runtime function read any secret; the migration function alone reads the master secret', () => {
    const functions = inboxFunctions(s.stateless);
    expect(functions).toHaveLength(CONSUMERS.length * 2 + 4);
    for (const f of functions) {
      const secretReads = f.statements.filter((st) => actionsOf(st).some((a) => a.startsWith('secretsmanager:')));
      if (expectedRole(f.description) === undefined) {
        expect(secretReads.flatMap(actionsOf)).toContain('secretsmanager:GetSecretValue');
        expect(secretReads.map((st) => st.Resource)).toEqual([statefulParameterRef(s, 'masterSecretArn')]);
        expect(statefulParameterValue(s, 'masterSecretArn')).toEqual({ Ref: expect.stringMatching(/^DatabaseSecretAttachment/) });
      } else {
        expect(secretReads, f.description).toEqual([]);
      }
    }
  });

  it("gives each runtime function rds-db:connect as its own database user only, on the cluster's resource id", () => {
    const seen = new Set<string>();
    for (const f of inboxFunctions(s.stateless)) {
      const role = expectedRole(f.description);
      const { users, resources } = databaseUsersOf(f.statements);
      expect(users, f.description).toEqual(role === undefined ? [] : [role]);
      for (const r of resources)
        expect(r).toContain(
          `":rds-db:",{"Ref":"AWS::Region"},":",{"Ref":"AWS::AccountId"},":dbuser:",${JSON.stringify(statefulParameterRef(s, 'connectResourceId'))},"/`,
        );
      if (role !== undefined) seen.add(role);
    }
    // One user per consumer and function kind, and one per cross-consumer function: no two functions share a user.
    expect([...seen].sort()).toEqual(runtimeRoles(CONSUMERS).sort());
    expect(seen.size).toBe(inboxFunctions(s.stateless).length - 1);
    expect([...seen]).toEqual(expect.arrayContaining(['inbox_worker_case_projection', 'inbox_ingest_notification_service']));
    // The relay: one per emitting consumer (case-sla alone among the reference consumers), as its consumer's relay role;
    // the kind role inbox_relay is a group that no function connects as.
    expect([...seen].filter((u) => u.startsWith('inbox_relay'))).toEqual(['inbox_relay_case_sla']);
    // Without a proxy, the resource id the stateful stack publishes is the cluster's.
    expect(statefulParameterValue(s, 'connectResourceId')).toEqual({ 'Fn::GetAtt': [DATABASE_CLUSTER_LOGICAL_ID, 'DBClusterResourceId'] });
    expect(statefulParameterValue(s, 'connectHost')).toEqual({ 'Fn::GetAtt': [DATABASE_CLUSTER_LOGICAL_ID, 'Endpoint.Address'] });
  });

  it('enables IAM database authentication and rotates the master secret automatically', () => {
    s.stateful.hasResourceProperties('AWS::RDS::DBCluster', { EnableIAMDatabaseAuthentication: true });
    s.stateful.resourceCountIs('AWS::SecretsManager::RotationSchedule', 1);
    s.stateful.hasResourceProperties('AWS::SecretsManager::RotationSchedule', {
      // The cluster's generated secret (through its attachment to the cluster).
      SecretId: { Ref: Match.stringLikeRegexp('^DatabaseSecretAttachment') },
      RotationRules: { ScheduleExpression: `rate(${MASTER_SECRET_ROTATION_DAYS} days)` },
      RotateImmediatelyOnUpdate: false,
    });
  });

  it('lets the ingest functions only write failed batches to the on-failure bucket (s3:PutObject, s3:ListBucket), ops only read them, and nobody else touch S3', () => {
    const [bucketId] = Object.keys(resourcesOf(s.platform, 'AWS::S3::Bucket'));
    expect(platformParameterValue(s, 'failedRecordsBucketArn')).toEqual({ 'Fn::GetAtt': [bucketId, 'Arn'] });
    const bucketArn = platformParameterRef(s, s.stateless, 'failedRecordsBucketArn');
    for (const f of inboxFunctions(s.stateless)) {
      const s3 = f.statements.filter((st) => actionsOf(st).some((a) => a.startsWith('s3:')));
      if (f.description.startsWith('Kafka inbox operator commands')) {
        // reingest-failed: the batches under aws/lambda/, read only (test/cdk/control-plane.test.ts).
        expect(s3.flatMap(actionsOf).sort(), f.description).toEqual(['s3:GetObject', 's3:ListBucket']);
        continue;
      }
      if (!f.description.startsWith('Kafka inbox ingest:')) {
        expect(s3, f.description).toEqual([]);
        continue;
      }
      expect(s3.map((st) => ({ actions: actionsOf(st), resource: st.Resource }))).toEqual([
        // Under the mappings' prefix only; the mapping's own (its UUID) cannot be named (kafka-ingest.ts).
        { actions: ['s3:PutObject'], resource: { 'Fn::Join': ['', [bucketArn, '/aws/lambda/*']] } },
        { actions: ['s3:ListBucket'], resource: bucketArn },
      ]);
    }
  });
});

describe('database', () => {
  it('is Aurora PostgreSQL 16/17 Serverless v2, encrypted, backed up, deletion-protected, under a pinned logical ID', () => {
    s.stateful.hasResource('AWS::RDS::DBCluster', {
      DeletionPolicy: 'Snapshot',
      Properties: Match.objectLike({
        Engine: 'aurora-postgresql',
        EngineVersion: Match.stringLikeRegexp('^1[67]\\.'),
        StorageEncrypted: true,
        DeletionProtection: true,
        BackupRetentionPeriod: Match.anyValue(),
        ServerlessV2ScalingConfiguration: Match.anyValue(),
      }),
    });
    expect(Object.keys(resourcesOf(s.stateful, 'AWS::RDS::DBCluster'))).toEqual([DATABASE_CLUSTER_LOGICAL_ID]);
  });

  it('has Performance Insights on the cluster and, said explicitly, on every instance', () => {
    s.stateful.hasResourceProperties('AWS::RDS::DBCluster', { PerformanceInsightsEnabled: true });
    const instances = Object.entries(resourcesOf(s.stateful, 'AWS::RDS::DBInstance'));
    expect(instances.length).toBeGreaterThan(0);
    for (const [id, instance] of instances) expect(instance.Properties!.EnablePerformanceInsights, id).toBe(true);
  });

  it('uses a generated secret: no secret value or password in either template', () => {
    s.stateful.resourceCountIs('AWS::SecretsManager::Secret', 1);
    s.stateful.hasResourceProperties('AWS::SecretsManager::Secret', {
      GenerateSecretString: Match.objectLike({ GenerateStringKey: 'password' }),
    });
    for (const template of [s.stateful, s.stateless]) {
      const json = JSON.stringify(template.toJSON());
      expect(json).not.toMatch(/"(Master)?UserPassword"\s*:\s*"[^{]/);
      expect(json).not.toMatch(/"SecretString"\s*:/);
      // A secret's JSON, or an environment variable, carrying a literal password.
      expect(json).not.toMatch(/"password"\s*:\s*"/i);
      expect(json).not.toMatch(/"[A-Z_]*PASSWORD[A-Z_]*"\s*:/);
      expect(json).not.toMatch(/postgres(ql)?:\/\/[^"]*:[^"]*@/);
    }
    // The cluster takes its password from the secret by dynamic reference.
    const cluster = resourcesOf(s.stateful, 'AWS::RDS::DBCluster')[DATABASE_CLUSTER_LOGICAL_ID]!;
    expect(JSON.stringify(cluster.Properties!.MasterUserPassword)).toContain('resolve:secretsmanager');
  });
});

/** Every metric name the dashboard charts and the alarms watch, in our namespace. */
function ourMetricNames(t: Template, namespace: string): { dashboard: Set<string>; alarms: Set<string> } {
  const dashboards = Object.values(resourcesOf(t, 'AWS::CloudWatch::Dashboard'));
  // The body is a Fn::Join of JSON text and references: join the text, stub the references.
  const body = dashboards
    .map((d) => {
      const b = d.Properties!.DashboardBody;
      return typeof b === 'string' ? b : (b['Fn::Join'][1] as unknown[]).map((p) => (typeof p === 'string' ? p : 'REF')).join('');
    })
    .join('');
  const dashboard = new Set([...body.matchAll(new RegExp(`\\["${namespace}","([A-Za-z0-9]+)"`, 'g'))].map((m) => m[1]!));
  const alarms = new Set<string>();
  for (const a of Object.values(resourcesOf(t, 'AWS::CloudWatch::Alarm'))) {
    const p = a.Properties!;
    if (p.Namespace === namespace) alarms.add(p.MetricName);
    for (const q of p.Metrics ?? []) if (q.MetricStat?.Metric.Namespace === namespace) alarms.add(q.MetricStat.Metric.MetricName);
  }
  return { dashboard, alarms };
}

/** `MetricNames.<Key>` references in the functions' sources (metric-names.ts itself excluded). */
function emittedMetricNames(): Set<string> {
  const root = new URL('../../functions/', import.meta.url).pathname;
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts') && !path.endsWith('metric-names.ts')) files.push(path);
    }
  };
  walk(root);
  const names = new Set<string>();
  for (const file of files) {
    for (const m of readFileSync(file, 'utf8').matchAll(/MetricNames\.([A-Za-z0-9]+)/g)) {
      const name = (MetricNames as Record<string, string>)[m[1]!];
      if (name !== undefined) names.add(name);
    }
  }
  return names;
}

describe('observability', () => {
  it('has a dashboard per consumer stack (ingest, processing, backlog, offset lag, Lambda) and an overview with Aurora', () => {
    const consumers = s.consumerStacks.main!;
    consumers.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    s.platform.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    const { dashboard } = ourMetricNames(consumers, s.config.observability.metricsNamespace);
    for (const name of [
      'RecordsReceived',
      'RecordsPoisoned',
      'EventsProcessed',
      'ProcessingLatency',
      'DueDepth',
      'OldestDueAgeSeconds',
      'QuarantineDepth',
    ]) {
      expect(dashboard, name).toContain(name);
    }
    const body = JSON.stringify(resourcesOf(consumers, 'AWS::CloudWatch::Dashboard'));
    for (const aws of ['OffsetLag', 'Errors', 'Throttles', 'Duration']) expect(body, aws).toContain(`\\"${aws}\\"`);
    const overview = JSON.stringify(resourcesOf(s.platform, 'AWS::CloudWatch::Dashboard'));
    for (const aws of ['Errors', 'Throttles', 'Duration', 'ServerlessDatabaseCapacity', 'DatabaseConnections'])
      expect(overview, aws).toContain(`\\"${aws}\\"`);
  });

  it('draws each widget of dashboard-widgets.ts for each consumer: its title, one line per series, its statistics', () => {
    const [dashboard] = Object.values(resourcesOf(s.consumerStacks.main!, 'AWS::CloudWatch::Dashboard'));
    const parts = dashboard!.Properties!.DashboardBody['Fn::Join'][1] as unknown[];
    const body = JSON.parse(parts.map((p) => (typeof p === 'string' ? p : 'REF')).join('')) as {
      widgets: { type: string; properties: { title?: string; metrics?: unknown[][] } }[];
    };
    for (const consumer of CONSUMERS) {
      for (const w of widgetsOf({ emits: consumer.emits !== undefined })) {
        const title = `${consumer.name}: ${w.title}`;
        const found = body.widgets.filter((x) => x.type === 'metric' && x.properties.title === title);
        expect(found, title).toHaveLength(1);
        const metrics = found[0]!.properties.metrics!;
        const lines = metrics.filter(
          (m) => !m.some((part) => typeof part === 'object' && part !== null && (part as { visible?: boolean }).visible === false),
        );
        const declared = { schemaRegistry: consumer.schemaRegistry !== undefined };
        const charted = [...seriesOf(w.left, declared), ...seriesOf(w.right ?? [], declared)];
        expect(lines, title).toHaveLength(charted.length);
        for (const series of charted) {
          if (!('metric' in series)) continue;
          const line = metrics.find((m) => m.includes(series.metric) && JSON.stringify(m).includes(`"stat":"${series.stat}"`));
          expect(line, `${title} ${series.metric} ${series.stat}`).toBeDefined();
        }
      }
    }
  });

  it('has every alarm for every consumer and function, each naming its runbook section and notifying the topic', () => {
    // The alarms that notify; a worker's heartbeat and pause alarms notify through a composite (control-plane.test.ts).
    const alarms = [
      ...Object.values(resourcesOf(s.stateless, 'AWS::CloudWatch::Alarm')),
      ...Object.values(resourcesOf(s.stateless, 'AWS::CloudWatch::CompositeAlarm')),
    ].filter((a) => a.Properties!.AlarmActions !== undefined);
    const functionCount = CONSUMERS.length * 2 + 3; // ingest + worker per consumer, reaper, ops, outbox relay
    const emitting = CONSUMERS.filter((c) => c.emits !== undefined).length;
    // per consumer 8 (+ outbox), errors and throttles per function, a heartbeat per scheduled
    // function (workers, reaper, relay), two queues, three on the database
    const scheduled = CONSUMERS.length + 2;
    expect(alarms).toHaveLength(CONSUMERS.length * 8 + emitting + functionCount * 2 + scheduled + 2 + 3);
    const runbook = readFileSync(new URL('../../docs/runbooks.md', import.meta.url), 'utf8');
    const bySection = new Map<string, number>();
    for (const a of alarms) {
      const section = Object.values(RUNBOOK).find((title) => a.Properties!.AlarmDescription.includes(`"Runbook: ${title}"`));
      expect(section, a.Properties!.AlarmDescription).toBeDefined();
      expect(runbook).toContain(`## Runbook: ${section}\n`);
      bySection.set(section!, (bySection.get(section!) ?? 0) + 1);
      expect(a.Properties!.AlarmActions).toHaveLength(1);
    }
    expect(bySection.get(RUNBOOK.quarantineDepth)).toBe(CONSUMERS.length);
    expect(bySection.get(RUNBOOK.poisonRecords)).toBe(CONSUMERS.length);
    expect(bySection.get(RUNBOOK.oldestDueAge)).toBe(CONSUMERS.length);
    expect(bySection.get(RUNBOOK.offsetLag)).toBe(CONSUMERS.length);
    expect(bySection.get(RUNBOOK.esmFailedRecords)).toBe(CONSUMERS.length);
    expect(bySection.get(RUNBOOK.permissionDenied)).toBe(CONSUMERS.length);
    expect(bySection.get(RUNBOOK.processingLatency)).toBe(CONSUMERS.length * 2);
    expect(bySection.get(RUNBOOK.functionErrors)).toBe(functionCount);
    expect(bySection.get(RUNBOOK.functionThrottles)).toBe(functionCount);
    expect(bySection.get(RUNBOOK.functionSilent)).toBe(scheduled);
    expect(bySection.get(RUNBOOK.failedInvocations)).toBe(2);
    expect(bySection.get(RUNBOOK.outboxUnpublishedAge)).toBe(emitting);
  });

  it("alarms on each consumer's latency p50 and p99, over periods with enough rows processed", () => {
    const alarms = Object.entries(resourcesOf(s.stateless, 'AWS::CloudWatch::Alarm')).filter(([id]) => /Latency(P50|P99)/.test(id));
    const t = s.config.alarms;
    expect(alarms).toHaveLength(CONSUMERS.length * 2);
    for (const c of CONSUMERS) {
      for (const [stat, threshold] of [
        ['p50', t.processingLatencyP50Ms],
        ['p99', t.processingLatencyP99Ms],
      ] as const) {
        const found = alarms.filter(([id]) => id.includes(`${c.name.replace(/[^A-Za-z0-9]/g, '')}Latency${stat.toUpperCase()}`));
        expect(found, `${c.name} ${stat}`).toHaveLength(1);
        const p = found[0]![1].Properties!;
        expect(p.Threshold).toBe(threshold);
        expect(p.ComparisonOperator).toBe('GreaterThanThreshold');
        const metrics = p.Metrics as {
          Id: string;
          Expression?: string;
          ReturnData?: boolean;
          MetricStat?: { Metric: { MetricName: string; Dimensions: { Name: string; Value: string }[] }; Stat: string };
        }[];
        expect(metrics.find((q) => q.Expression !== undefined)).toMatchObject({
          Expression: `IF(samples >= ${t.latencyMinSamples}, latency, 0)`,
        });
        const stats = metrics
          .filter((q) => q.MetricStat !== undefined)
          .map((q) => [q.Id, q.MetricStat!.Metric.MetricName, q.MetricStat!.Stat]);
        expect(stats.sort()).toEqual([
          ['latency', MetricNames.ProcessingLatency, stat],
          ['samples', MetricNames.ProcessingLatency, 'SampleCount'],
        ]);
        expect(
          metrics.every(
            (q) =>
              q.MetricStat === undefined || q.MetricStat.Metric.Dimensions.some((d) => d.Name === 'ConsumerName' && d.Value === c.name),
          ),
        ).toBe(true);
      }
    }
  });

  it("charts the latency percentiles, the wake-ups and the functions' concurrency", () => {
    const [dashboard] = Object.values(resourcesOf(s.consumerStacks.main!, 'AWS::CloudWatch::Dashboard'));
    const parts = dashboard!.Properties!.DashboardBody['Fn::Join'][1] as unknown[];
    const body = JSON.parse(parts.map((p) => (typeof p === 'string' ? p : 'REF')).join('')) as {
      widgets: { type: string; properties: { title?: string; metrics?: unknown[][] } }[];
    };
    const widget = (title: string) => body.widgets.find((w) => w.properties.title === title);
    for (const c of CONSUMERS) {
      const latency = JSON.stringify(widget(`${c.name}: latency received → processed`)!.properties.metrics);
      for (const stat of ['p50', 'p95', 'p99']) expect(latency).toContain(`"stat":"${stat}"`);
      expect(latency).toContain(MetricNames.ProcessingLatency);
      const wakeUps = JSON.stringify(widget(`${c.name}: wake-ups and pause`)!.properties.metrics);
      for (const name of [
        MetricNames.WakeUpsSent,
        MetricNames.FanOutsSent,
        MetricNames.HandOversSent,
        MetricNames.WakeUpFailures,
        MetricNames.ConsumerPaused,
      ]) {
        expect(wakeUps).toContain(`"${name}"`);
      }
    }
    expect(JSON.stringify(widget('Lambda concurrent executions')!.properties.metrics)).toContain('"ConcurrentExecutions"');
  });

  it('charts and alarms only on metrics that some function emits', () => {
    const { dashboard, alarms } = ourMetricNames(s.stateless, s.config.observability.metricsNamespace);
    const emitted = emittedMetricNames();
    expect(dashboard.size).toBeGreaterThan(0);
    expect([...dashboard].filter((n) => !emitted.has(n))).toEqual([]);
    expect([...alarms].filter((n) => !emitted.has(n))).toEqual([]);
  });
});

describe('security checks', () => {
  it('cdk-nag AwsSolutions reports no unacknowledged error', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });

  it('gives every acknowledged finding a written reason', () => {
    const acknowledgements = s.app.node
      .findAll()
      .flatMap((c) => c.node.metadata.filter((m) => m.type === 'aws:cdk:acknowledged-rules'))
      .flatMap((m) => Object.entries(m.data as Record<string, string>));
    expect(acknowledgements.length).toBeGreaterThan(0);
    for (const [id, reason] of acknowledgements) expect(String(reason).trim().length, id).toBeGreaterThan(20);
  });
});

describe('bundles', () => {
  it('bundles every function with the local esbuild, each under 1 MiB (ingest with its Avro and Protobuf decoders 1.25 MiB; ops 1.5 MiB; the relay with its Kafka client 1.75 MiB), and prints the sizes', () => {
    const assets = readdirSync(outdir).filter((d) => d.startsWith('asset.') && statSync(join(outdir, d)).isDirectory());
    const sizes: { fn: string; bytes: number }[] = [];
    for (const [logicalId, f] of Object.entries(resourcesOf(s.stateless, 'AWS::Lambda::Function'))) {
      const key = JSON.stringify(f.Properties!.Code);
      const asset = assets.find((a) => key.includes(a.slice('asset.'.length)));
      if (asset === undefined || !String(f.Properties!.Description ?? '').startsWith('Kafka inbox')) continue;
      const bundle = join(outdir, asset, 'index.mjs');
      sizes.push({ fn: `${logicalId} (${f.Properties!.Description})`, bytes: statSync(bundle).size });
    }
    expect(sizes).toHaveLength(CONSUMERS.length * 2 + 4);
    console.log(sizes.map(({ fn, bytes }) => `${(bytes / 1024).toFixed(1).padStart(8)} KiB  ${fn}`).join('\n'));
    // A bundle's size is paid at every cold start. The worker, the reaper and the migrations
    // stay within 1 MiB; ingest carries the Avro and Protobuf decoders (protobufjs with its
    // parser: registries serve .proto text); ops and the relay are off the records' path. Every
    // function carries the OpenTelemetry API (about 120 KiB) and its SDK with both OTLP exporters
    // (about 175 KiB, run only when a stage turns tracing on); the relay's Kafka client takes it
    // past 1.5 MiB.
    const limitMiB = (fn: string) =>
      fn.includes('outbox relay') ? 1.75 : fn.includes('operator commands') ? 1.5 : fn.includes('inbox ingest') ? 1.25 : 1;
    for (const { fn, bytes } of sizes) expect(bytes, fn).toBeLessThan(limitMiB(fn) * 1024 * 1024);
  });

  it('the relay bundle carries the Kafka client’s WebAssembly inline: no .wasm file to read beside it in Lambda', () => {
    const relay = Object.values(resourcesOf(s.stateless, 'AWS::Lambda::Function')).find((f) =>
      String(f.Properties!.Description).includes('outbox relay'),
    )!;
    const key = JSON.stringify(relay.Properties!.Code);
    const asset = readdirSync(outdir).find((a) => a.startsWith('asset.') && key.includes(a.slice('asset.'.length)))!;
    const bundle = readFileSync(join(outdir, asset, 'index.mjs'), 'utf8');

    expect(readdirSync(join(outdir, asset))).toEqual(['index.mjs']);
    // "\0asm" in base64, the start of the inline module; the package's default entry would read dist/native.wasm.
    expect(bundle).toContain('AGFzbQ');
    expect(bundle).not.toContain('native.wasm');
  });

  it('copies the migrations into the migration function bundle', () => {
    const migrate = Object.values(resourcesOf(s.stateless, 'AWS::Lambda::Function')).find((f) =>
      String(f.Properties!.Description).includes('apply pending database migrations'),
    )!;
    const key = JSON.stringify(migrate.Properties!.Code);
    const asset = readdirSync(outdir).find((a) => a.startsWith('asset.') && key.includes(a.slice('asset.'.length)))!;
    const bundled = readdirSync(join(outdir, asset, 'migrations')).sort();
    const source = readdirSync(new URL('../../migrations/', import.meta.url))
      .filter((f) => f.endsWith('.sql'))
      .sort();
    expect(bundled).toEqual(source);
  });
});

describe('a bundle per consumer', () => {
  /** A handler's statement of case-projection's module: in its own functions' bundles only. */
  const PROJECTION_SQL = 'select s.case_id, s.case_status from read_model.case_summary s';

  interface Bundle {
    description: string;
    key: string;
    text: string;
  }
  /** Every function of the project in a synthesized app: its description, asset key and bundle. */
  function bundlesOf(synthesized: Synthesized, dir: string): Bundle[] {
    const assets = readdirSync(dir).filter((d) => d.startsWith('asset.'));
    return Object.values(resourcesOf(synthesized.stateless, 'AWS::Lambda::Function'))
      .filter((f) => String(f.Properties!.Description ?? '').startsWith('Kafka inbox'))
      .map((f) => {
        const key = JSON.stringify(f.Properties!.Code);
        const asset = assets.find((a) => key.includes(a.slice('asset.'.length)))!;
        return { description: String(f.Properties!.Description), key, text: readFileSync(join(dir, asset, 'index.mjs'), 'utf8') };
      });
  }
  const isPlatform = (b: Bundle) => /^Kafka inbox( reaper| operator commands|: apply pending)/.test(b.description);
  const ofConsumer = (b: Bundle, name: string) => new RegExp(`^Kafka inbox (ingest|worker|outbox relay): ${name}( |$)`).test(b.description);

  let bundles: Bundle[];
  let added: { s: Synthesized; dir: string; bundles: Bundle[] };
  beforeAll(() => {
    bundles = bundlesOf(s, outdir);
    // The dev stage again with one more consumer, in a module of its own (its table its own).
    const dir = mkdtempSync(join(tmpdir(), 'inbox-cdk-added-'));
    const withMarker = synthesize({
      bundle: true,
      outdir: dir,
      consumers: [...CONSUMERS, { ...markerConsumer, source: { file: 'test/cdk/fixtures/marker-consumer.ts' } }],
    });
    withMarker.app.synth();
    added = { s: withMarker, dir, bundles: bundlesOf(withMarker, dir) };
  });
  afterAll(() => {
    rmSync(added.dir, { recursive: true, force: true });
  });

  it("gives each consumer's ingest, worker and relay an asset of its own", () => {
    const consumerBundles = bundles.filter((b) => !isPlatform(b));
    expect(consumerBundles).toHaveLength(CONSUMERS.length * 2 + CONSUMERS.filter((c) => c.emits !== undefined).length);
    expect(new Set(consumerBundles.map((b) => b.key)).size).toBe(consumerBundles.length);
  });

  it("holds case-projection's handlers in case-projection's ingest and worker only: not in the migrate, ops, reaper or relay bundles, nor another consumer's", () => {
    const holding = bundles.filter((b) => b.text.includes(PROJECTION_SQL)).map((b) => b.description);
    expect(holding.sort()).toEqual(['Kafka inbox ingest: case-projection (deferred)', 'Kafka inbox worker: case-projection']);
    expect(bundles.filter(isPlatform)).toHaveLength(3);
  });

  it("holds an added consumer's module in its own two functions only", () => {
    const holding = added.bundles.filter((b) => b.text.includes(MARKER)).map((b) => b.description);
    expect(holding.sort()).toEqual(['Kafka inbox ingest: marker-consumer (deferred)', 'Kafka inbox worker: marker-consumer']);
    // The platform's functions know it from the manifest: its name and table, no code.
    for (const b of added.bundles.filter(isPlatform)) expect(b.text, b.description).toContain('marker.marked');
  });

  it("adding a consumer changes the platform's functions (the manifest), and no other consumer's function code", () => {
    for (const c of CONSUMERS) {
      const before = bundles.filter((b) => ofConsumer(b, c.name));
      const after = added.bundles.filter((b) => ofConsumer(b, c.name));
      expect(before.length, c.name).toBeGreaterThan(0);
      expect(
        after.map((b) => b.key),
        c.name,
      ).toEqual(before.map((b) => b.key));
    }
    const platformKeys = (list: Bundle[]) => list.filter(isPlatform).map((b) => b.key);
    for (const key of platformKeys(added.bundles)) expect(platformKeys(bundles)).not.toContain(key);
  });

  it('refuses two consumers naming one table, unless the stage lists it in sharedTables', () => {
    const taking = {
      ...markerConsumer,
      tables: { 'read_model.case_summary': { select: true as const } },
      source: { file: 'test/cdk/fixtures/marker-consumer.ts' },
    };
    expect(() => synthesize({ bundle: false, consumers: [...CONSUMERS, taking] })).toThrow(
      'consumer declarations: table "read_model.case_summary" is named by consumers "case-projection" and "marker-consumer": a table belongs to one consumer, unless the stage lists it in sharedTables',
    );
    expect(() =>
      synthesize({
        bundle: false,
        consumers: [...CONSUMERS, taking],
        overrides: { sharedTables: ['case_core.case_audit', 'read_model.case_summary'] },
      }),
    ).not.toThrow();
  });
});
