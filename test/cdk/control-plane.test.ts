/**
 * The operator's levers and the alarms in the dev stage's templates: silence pages (a
 * heartbeat per scheduled function, missing data breaching, a paused consumer's worker held
 * back), failures page (dead letters, failed asynchronous invocations, throttles, the
 * database), asynchronous invocations neither retry nor age, and the control plane's own
 * least privilege (the replay schedules' role, iam:PassRole to Scheduler only, mapping
 * updates for the ingest functions only).
 */
import { readFileSync } from 'node:fs';
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { RUNBOOK, RUNBOOK_FILES } from '../../cdk/constructs/alarms';
import { connectionsAlarmThreshold, serverlessV2MaxConnections } from '../../cdk/connection-budget';
import { CONSUMERS } from '../../functions/consumers/index';
import { emitsEvents } from '../../functions/framework/types';
import { MetricNames } from '../../functions/lib/metric-names';
import { INGEST_TAG, WORKER_TAG } from '../../cdk/constructs/ops';
import { SCHEDULED_TAG } from '../../cdk/constructs/scheduled';
import {
  actionsOf,
  platformParameterRef,
  platformParameterValue,
  statementsOfRole,
  synthesize,
  unacknowledgedNagErrors,
  type PolicyStatement,
  type Synthesized,
} from './synth';

let s: Synthesized;
beforeAll(() => {
  s = synthesize({ bundle: false });
});

type Resource = { Type: string; Properties: Record<string, any> };
const resources = (t: Template, type: string) => Object.entries(t.findResources(type)) as [string, Resource][];
const functionsBy = (t: Template, description: RegExp) =>
  resources(t, 'AWS::Lambda::Function').filter(([, f]) => description.test(String(f.Properties.Description)));
const roleOf = (f: Resource) => (f.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
const alarmsOf = (t: Template) => resources(t, 'AWS::CloudWatch::Alarm');
const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The alarm that notifies about `section`, whose metrics or description mention `about`. */
function notifying(t: Template, section: string, about: (a: Resource) => boolean) {
  return alarmsOf(t).filter(([, a]) => String(a.Properties.AlarmDescription).includes(`"Runbook: ${section}"`) && about(a));
}

const metricsOf = (a: Resource) =>
  a.Properties.Metrics as { Id: string; Expression?: string; MetricStat?: { Metric: any; Stat: string; Period: number } }[];
const refersTo = (a: Resource, logicalId: string) => JSON.stringify(a.Properties).includes(`"Ref":"${logicalId}"`);

describe('silence pages: a heartbeat per scheduled function', () => {
  const scheduledFunctions = () => [
    ...functionsBy(s.stateless, /^Kafka inbox worker: /),
    ...functionsBy(s.stateless, /^Kafka inbox reaper/),
    ...functionsBy(s.stateless, /^Kafka inbox outbox relay/),
  ];

  it('alarms when a scheduled function completed no invocation (Invocations − Errors < 1), missing data breaching', () => {
    const functions = scheduledFunctions();
    expect(functions).toHaveLength(CONSUMERS.length + 2);
    for (const [id, f] of functions) {
      const heartbeats = alarmsOf(s.stateless).filter(
        ([, a]) =>
          a.Properties.Metrics !== undefined &&
          metricsOf(a).some((q) => q.Expression === 'invocations - FILL(errors, 0)') &&
          refersTo(a, id),
      );
      expect(heartbeats, f.Properties.Description).toHaveLength(1);
      const p = heartbeats[0]![1].Properties;
      expect(p).toMatchObject({
        ComparisonOperator: 'LessThanThreshold',
        Threshold: 1,
        TreatMissingData: 'breaching',
        EvaluationPeriods: s.config.alarms.heartbeatPeriods,
      });
      const stats = metricsOf(heartbeats[0]![1])
        .filter((q) => q.MetricStat)
        .map((q) => [q.Id, q.MetricStat!.Metric.MetricName, q.MetricStat!.Stat, q.MetricStat!.Period]);
      expect(stats.sort()).toEqual([
        ['errors', 'Errors', 'Sum', 300],
        ['invocations', 'Invocations', 'Sum', 300],
      ]);
    }
  });

  it('pages for the reaper and the relay directly, naming the runbook section that exists', () => {
    for (const label of ['reaper', 'outbox relay']) {
      const found = notifying(s.stateless, RUNBOOK.functionSilent, (a) => String(a.Properties.AlarmDescription).startsWith(`${label}:`));
      expect(found, label).toHaveLength(1);
      expect(found[0]![1].Properties.AlarmActions).toHaveLength(1);
      expect(found[0]![1].Properties.TreatMissingData).toBe('breaching');
    }
    expect(README).toContain(`### Runbook: ${RUNBOOK.functionSilent}\n`);
  });

  it("covers the reaper's gauges: the backlog alarms read only what the reaper publishes, and its heartbeat pages when it stops", () => {
    const reaperGauges: string[] = [
      MetricNames.DueDepth,
      MetricNames.OldestDueAgeSeconds,
      MetricNames.QuarantineDepth,
      MetricNames.HeldDepth,
      MetricNames.ConsumerPaused,
    ];
    const [[reaperId]] = functionsBy(s.stateless, /^Kafka inbox reaper/) as [[string, Resource]];
    // Every alarm on a reaper gauge is quiet when the gauge is missing…
    const onGauges = alarmsOf(s.stateless).filter(([, a]) =>
      reaperGauges.some((g) => JSON.stringify(a.Properties).includes(`"MetricName":"${g}"`)),
    );
    expect(onGauges.length).toBeGreaterThanOrEqual(CONSUMERS.length * 2);
    // …so the reaper's silence must page by itself: one alarm on its own invocations, breaching when they are missing.
    const reaperHeartbeat = alarmsOf(s.stateless).filter(([, a]) => refersTo(a, reaperId) && a.Properties.TreatMissingData === 'breaching');
    expect(reaperHeartbeat).toHaveLength(1);
    expect(reaperHeartbeat[0]![1].Properties.AlarmActions).toHaveLength(1);
  });

  it("holds back a worker's heartbeat while its consumer is paused: a composite alarm, ALARM(silent) AND NOT ALARM(paused)", () => {
    const composites = resources(s.stateless, 'AWS::CloudWatch::CompositeAlarm');
    expect(composites).toHaveLength(CONSUMERS.length);
    for (const c of CONSUMERS) {
      const key = c.name.replace(/[^A-Za-z0-9]/g, '');
      const [[silentId, silent]] = alarmsOf(s.stateless).filter(([id]) => id.includes(`${key}workerSilent`)) as [[string, Resource]];
      const [[pausedId, paused]] = alarmsOf(s.stateless).filter(([id]) => id.includes(`${key}workerPaused`)) as [[string, Resource]];
      // Neither notifies by itself.
      expect(silent.Properties.AlarmActions).toBeUndefined();
      expect(paused.Properties.AlarmActions).toBeUndefined();
      expect(silent.Properties.TreatMissingData).toBe('breaching');
      expect(paused.Properties).toMatchObject({
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
        Threshold: 1,
        TreatMissingData: 'ignore',
      });
      const [stat] = metricsOf(paused).map((q) => q.MetricStat!);
      expect(stat).toMatchObject({ Metric: { MetricName: MetricNames.ConsumerPaused }, Stat: 'Maximum' });
      expect(stat!.Metric.Dimensions).toContainEqual({ Name: 'ConsumerName', Value: c.name });
      const composite = composites.find(([, a]) => JSON.stringify(a.Properties.AlarmRule).includes(silentId));
      expect(composite, c.name).toBeDefined();
      const rule = JSON.stringify(composite![1].Properties.AlarmRule);
      expect(rule).toContain(`"${silentId}"`);
      expect(rule).toContain(`"${pausedId}"`);
      expect(rule).toContain('NOT');
      expect(composite![1].Properties.AlarmActions).toHaveLength(1);
      expect(composite![1].Properties.OKActions).toHaveLength(1);
      expect(composite![1].Properties.AlarmDescription).toContain(`"Runbook: ${RUNBOOK.functionSilent}"`);
    }
  });

  it("does not page for a paused consumer's growing backlog: the oldest due age counts as 0 while it is paused", () => {
    for (const c of CONSUMERS) {
      const key = c.name.replace(/[^A-Za-z0-9]/g, '');
      const [[, alarm]] = alarmsOf(s.stateless).filter(([id]) => id.includes(`${key}OldestDueAge`)) as [[string, Resource]];
      const metrics = metricsOf(alarm);
      expect(metrics.find((q) => q.Expression !== undefined)!.Expression).toBe('IF(paused >= 1, 0, value)');
      expect(
        metrics
          .filter((q) => q.MetricStat)
          .map((q) => [q.Id, q.MetricStat!.Metric.MetricName])
          .sort(),
      ).toEqual([
        ['paused', MetricNames.ConsumerPaused],
        ['value', MetricNames.OldestDueAgeSeconds],
      ]);
    }
  });
});

describe('failures page: queues, throttles, the database', () => {
  it("alarms on messages in the schedules' dead-letter queue and in the failed-invocations queue", () => {
    const queues = resources(s.stateless, 'AWS::SQS::Queue').map(([id]) => id);
    expect(queues.some((q) => q.includes('DeadLetters'))).toBe(true);
    expect(queues.some((q) => q.includes('FailedInvocations'))).toBe(true);
    for (const q of queues) {
      const found = notifying(s.stateless, RUNBOOK.failedInvocations, (a) => JSON.stringify(a.Properties.Dimensions ?? []).includes(q));
      expect(found, q).toHaveLength(1);
      expect(found[0]![1].Properties).toMatchObject({
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Namespace: 'AWS/SQS',
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
      });
    }
  });

  it('alarms on throttles of every function', () => {
    const functions = functionsBy(s.stateless, /^Kafka inbox (ingest|worker|reaper|operator|outbox relay)/);
    expect(functions).toHaveLength(CONSUMERS.length * 2 + 3);
    for (const [id, f] of functions) {
      const found = notifying(s.stateless, RUNBOOK.functionThrottles, (a) => a.Properties.MetricName === 'Throttles' && refersTo(a, id));
      expect(found, f.Properties.Description).toHaveLength(1);
      expect(found[0]![1].Properties).toMatchObject({ Statistic: 'Sum', Threshold: s.config.alarms.functionThrottles });
    }
  });

  it('alarms on the database: capacity, connections against the maximum, freeable memory', () => {
    const t = s.config.alarms;
    const max = s.config.database.maxCapacityAcu;
    const expected = [
      [RUNBOOK.databaseCapacity, 'ACUUtilization', 'GreaterThanThreshold', t.databaseCapacityPercent],
      [RUNBOOK.databaseConnections, 'DatabaseConnections', 'GreaterThanThreshold', connectionsAlarmThreshold(s.config)],
      [
        RUNBOOK.databaseMemory,
        'FreeableMemory',
        'LessThanThreshold',
        Math.floor((max * 2 * 1024 ** 3 * t.databaseFreeableMemoryPercent) / 100),
      ],
    ] as const;
    for (const [section, metric, operator, threshold] of expected) {
      const found = notifying(s.stateless, section, (a) => a.Properties.MetricName === metric);
      expect(found, metric).toHaveLength(1);
      expect(found[0]![1].Properties).toMatchObject({ Namespace: 'AWS/RDS', ComparisonOperator: operator, Threshold: threshold });
      expect(JSON.stringify(found[0]![1].Properties.Dimensions)).toContain('DBClusterIdentifier');
      expect(README).toContain(`### Runbook: ${section}\n`);
    }
    // dev: 0.5–2 ACU, 400 connections (between AWS's 189 at 1 ACU and 823 at 4); the alarm at 80 %.
    expect(serverlessV2MaxConnections(0.5, max).value).toBe(400);
    expect(connectionsAlarmThreshold(s.config)).toBe(320);
  });

  it('names a runbook section that exists in every alarm that notifies', () => {
    const notifyingAlarms = [...alarmsOf(s.stateless), ...resources(s.stateless, 'AWS::CloudWatch::CompositeAlarm')].filter(
      ([, a]) => a.Properties.AlarmActions !== undefined,
    );
    for (const [id, a] of notifyingAlarms) {
      const key = (Object.keys(RUNBOOK) as (keyof typeof RUNBOOK)[]).find((k) =>
        String(a.Properties.AlarmDescription).includes(`"Runbook: ${RUNBOOK[k]}"`),
      );
      expect(key, id).toBeDefined();
      const file = RUNBOOK_FILES[key!];
      expect(file === undefined ? README : readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8'), key).toContain(
        `### Runbook: ${RUNBOOK[key!]}\n`,
      );
    }
  });
});

describe('asynchronous invocations: no retry, no old event, failures kept', () => {
  it('configures every function invoked asynchronously (workers, reaper, relay, ops): 0 retries, 60 s, the failed-invocations queue', () => {
    const configs = resources(s.stateless, 'AWS::Lambda::EventInvokeConfig');
    const invokedAsync = functionsBy(s.stateless, /^Kafka inbox (worker|reaper|outbox relay|operator)/);
    expect(invokedAsync).toHaveLength(CONSUMERS.length + 3);
    const [[queueId]] = resources(s.platform, 'AWS::SQS::Queue').filter(([id]) => id.includes('FailedInvocations')) as [[string, Resource]];
    // The platform's functions name the queue; the consumer stacks' workers, its ARN as the platform writes it.
    expect(platformParameterValue(s, 'failedInvocationsQueueArn')).toEqual({ 'Fn::GetAtt': [queueId, 'Arn'] });
    const platformIds = new Set(Object.keys(s.platform.findResources('AWS::Lambda::Function')));
    for (const [id, f] of invokedAsync) {
      const queueArn = platformIds.has(id)
        ? { 'Fn::GetAtt': [queueId, 'Arn'] }
        : platformParameterRef(s, s.consumerStacks.main!, 'failedInvocationsQueueArn');
      const config = configs.filter(([, c]) => JSON.stringify(c.Properties.FunctionName) === JSON.stringify({ Ref: id }));
      expect(config, f.Properties.Description).toHaveLength(1);
      expect(config[0]![1].Properties).toEqual({
        FunctionName: { Ref: id },
        Qualifier: '$LATEST',
        MaximumRetryAttempts: 0,
        MaximumEventAgeInSeconds: 60,
        DestinationConfig: { OnFailure: { Destination: queueArn } },
      });
      // The function may send its failures there, and nothing else to SQS.
      const sqs = statementsOfRole(s.stateless, roleOf(f)).filter((st) => actionsOf(st).some((a) => a.startsWith('sqs:')));
      expect(sqs.map((st) => st.Resource)).toEqual([queueArn]);
    }
    // No function is retried asynchronously by Lambda's defaults.
    expect(configs).toHaveLength(invokedAsync.length);
  });
});

describe("the control plane's least privilege", () => {
  const ops = () => functionsBy(s.stateless, /^Kafka inbox operator commands/)[0]!;
  const opsStatements = () => statementsOfRole(s.stateless, roleOf(ops()[1]));

  it('runs replay schedules under a role of their own that can invoke the ops function and nothing else', () => {
    const env = ops()[1].Properties.Environment.Variables;
    const replayRoleId = (env.SCHEDULER_ROLE_ARN as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    expect(replayRoleId).toMatch(/ReplayRole/);
    const [role] = resources(s.stateless, 'AWS::IAM::Role').filter(([id]) => id === replayRoleId);
    expect(role![1].Properties.AssumeRolePolicyDocument.Statement).toEqual([
      { Action: 'sts:AssumeRole', Effect: 'Allow', Principal: { Service: 'scheduler.amazonaws.com' } },
    ]);
    expect(role![1].Properties.ManagedPolicyArns).toBeUndefined();
    expect(statementsOfRole(s.stateless, replayRoleId)).toEqual([
      { Action: 'lambda:InvokeFunction', Effect: 'Allow', Resource: { 'Fn::GetAtt': [ops()[0], 'Arn'] } },
    ]);
    // The recurring schedules' role no longer invokes the ops function.
    const recurring = resources(s.stateless, 'AWS::IAM::Role').filter(([id]) => /SchedulesRole/.test(id));
    expect(recurring).toHaveLength(1);
    expect(JSON.stringify(statementsOfRole(s.stateless, recurring[0]![0]))).not.toContain(ops()[0]);
  });

  it("passes roles to EventBridge Scheduler only: the schedules' role and the replay role", () => {
    const passRole = opsStatements().filter((st) => actionsOf(st).includes('iam:PassRole'));
    expect(passRole).toHaveLength(1);
    expect(passRole[0]).toMatchObject({ Condition: { StringEquals: { 'iam:PassedToService': 'scheduler.amazonaws.com' } } });
    const roles = [passRole[0]!.Resource].flat().map((r) => (r as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0]);
    expect(roles.sort()).toEqual(
      resources(s.stateless, 'AWS::IAM::Role')
        .map(([id]) => id)
        .filter((id) => /SchedulesRole|ReplayRole/.test(id))
        .sort(),
    );
    // No other statement anywhere grants iam:PassRole.
    const everywhere = resources(s.stateless, 'AWS::IAM::Policy').flatMap(
      ([, p]) => p.Properties.PolicyDocument.Statement as PolicyStatement[],
    );
    expect(everywhere.filter((st) => actionsOf(st).includes('iam:PassRole'))).toHaveLength(1);
  });

  it("reads and updates the event-source mappings that carry this stage's ingest tag, and no other", () => {
    const update = opsStatements().filter((st) => actionsOf(st).some((a) => a.endsWith('EventSourceMapping')));
    expect(update).toHaveLength(1);
    expect(actionsOf(update[0]!).sort()).toEqual(['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping']);
    expect(JSON.stringify(update[0]!.Resource)).toContain(':event-source-mapping:*');
    expect((update[0] as PolicyStatement & { Condition: unknown }).Condition).toEqual({
      StringEquals: { [`aws:ResourceTag/${INGEST_TAG}`]: 'KafkaInbox-dev' },
    });
    // Every mapping carries it, with its ingest function; no worker does.
    for (const [id, m] of resources(s.stateless, 'AWS::Lambda::EventSourceMapping')) {
      expect(m.Properties.Tags, id).toContainEqual({ Key: INGEST_TAG, Value: 'KafkaInbox-dev' });
    }
    for (const [id, f] of functionsBy(s.stateless, /^Kafka inbox worker: /))
      expect(JSON.stringify(f.Properties.Tags ?? []), id).not.toContain(INGEST_TAG);
  });

  it("lets ops resume wake a worker of this stage's consumer stacks (its tag), found in the consumer directory", () => {
    const workers = functionsBy(s.stateless, /^Kafka inbox worker: /);
    const invoke = opsStatements().filter(
      (st) => actionsOf(st).includes('lambda:InvokeFunction') && JSON.stringify(st).includes(`aws:ResourceTag/${WORKER_TAG}`),
    );
    expect(invoke).toHaveLength(1);
    expect(JSON.stringify(invoke[0]!.Resource)).toContain(':function:*');
    expect((invoke[0] as PolicyStatement & { Condition: unknown }).Condition).toEqual({
      StringEquals: { [`aws:ResourceTag/${WORKER_TAG}`]: 'KafkaInbox-dev' },
    });
    for (const [id, f] of workers) expect(f.Properties.Tags, id).toContainEqual({ Key: WORKER_TAG, Value: 'KafkaInbox-dev' });
    // No other function carries the tag: ops can wake nothing else.
    const tagged = resources(s.stateless, 'AWS::Lambda::Function').filter(([, f]) =>
      JSON.stringify(f.Properties.Tags ?? []).includes(WORKER_TAG),
    );
    expect(tagged.map(([id]) => id).sort()).toEqual(workers.map(([id]) => id).sort());
    const entries = JSON.stringify(
      resources(s.stateless, 'AWS::SSM::Parameter').filter(([, p]) => String(p.Properties.Name).startsWith('/KafkaInbox/dev/consumers/')),
    );
    for (const [id] of workers) expect(entries).toContain(`{"Ref":"${id}"}`);
    expect(Object.keys(ops()[1].Properties.Environment.Variables)).not.toContain('WORKER_FUNCTIONS');
  });

  it('lets ops reingest-failed read the failed batches (no write or delete) and invoke the ingest functions of this stage, by their tag', () => {
    const [bucketId] = resources(s.platform, 'AWS::S3::Bucket')[0]!;
    expect(ops()[1].Properties.Environment.Variables.FAILED_RECORDS_BUCKET).toEqual({ Ref: bucketId });
    const onBucket = opsStatements().filter((st) => JSON.stringify(st.Resource).includes(bucketId));
    expect(
      onBucket.map((st) => ({ actions: actionsOf(st), resource: st.Resource, condition: (st as { Condition?: unknown }).Condition })),
    ).toEqual([
      {
        actions: ['s3:ListBucket'],
        resource: { 'Fn::GetAtt': [bucketId, 'Arn'] },
        condition: { StringLike: { 's3:prefix': 'aws/lambda/*' } },
      },
      {
        actions: ['s3:GetObject'],
        resource: { 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/aws/lambda/*']] },
        condition: undefined,
      },
    ]);
    const invoke = opsStatements().filter(
      (st) => actionsOf(st).includes('lambda:InvokeFunction') && JSON.stringify(st).includes(`aws:ResourceTag/${INGEST_TAG}`),
    );
    expect(invoke).toHaveLength(1);
    expect(actionsOf(invoke[0]!)).toEqual(['lambda:InvokeFunction']);
    expect((invoke[0] as PolicyStatement & { Condition: unknown }).Condition).toEqual({
      StringEquals: { [`aws:ResourceTag/${INGEST_TAG}`]: 'KafkaInbox-dev' },
    });
    // The functions that carry the tag are the ingest functions, each named in its consumer's directory entry.
    const ingest = functionsBy(s.stateless, /^Kafka inbox ingest: /);
    const tagged = resources(s.stateless, 'AWS::Lambda::Function').filter(([, f]) =>
      JSON.stringify(f.Properties.Tags ?? []).includes(INGEST_TAG),
    );
    expect(tagged.map(([id]) => id).sort()).toEqual(ingest.map(([id]) => id).sort());
    const entries = JSON.stringify(
      resources(s.stateless, 'AWS::SSM::Parameter').filter(([, p]) => String(p.Properties.Name).startsWith('/KafkaInbox/dev/consumers/')),
    );
    for (const [id] of ingest) expect(entries).toContain(`\\"ingestFunction\\":\\"",{"Ref":"${id}"}`);
  });

  it("lets the schedules' role invoke the workers and relays of this stage's consumer stacks by their tag, and them alone", () => {
    const [[roleId]] = resources(s.platform, 'AWS::IAM::Role').filter(([id]) => /SchedulesRole/.test(id)) as [[string, Resource]];
    const byTag = statementsOfRole(s.platform, roleId).filter((st) => JSON.stringify(st).includes('aws:ResourceTag'));
    expect(byTag).toHaveLength(1);
    expect(actionsOf(byTag[0]!)).toEqual(['lambda:InvokeFunction']);
    expect((byTag[0] as PolicyStatement & { Condition: unknown }).Condition).toEqual({
      StringEquals: { [`aws:ResourceTag/${SCHEDULED_TAG}`]: 'KafkaInbox-dev' },
    });
    const tagged = resources(s.stateless, 'AWS::Lambda::Function').filter(([, f]) =>
      JSON.stringify(f.Properties.Tags ?? []).includes(SCHEDULED_TAG),
    );
    // Each consumer's worker, and the relay of each consumer that emits (case-sla).
    const emitting = CONSUMERS.filter(emitsEvents);
    expect(tagged.map(([, f]) => f.Properties.Description).sort()).toEqual(
      [...CONSUMERS.map((c) => `Kafka inbox worker: ${c.name}`), ...emitting.map((c) => `Kafka inbox outbox relay: ${c.name}`)].sort(),
    );
    // Their schedules run as that role, named for their consumer.
    const schedules = resources(s.consumerStacks.main!, 'AWS::Scheduler::Schedule');
    expect(schedules.map(([, sc]) => sc.Properties.Name).sort()).toEqual(
      [...CONSUMERS.map((c) => `worker-${c.name}`), ...emitting.map((c) => `relay-${c.name}`)].sort(),
    );
    for (const [, sc] of schedules)
      expect(sc.Properties.Target.RoleArn).toEqual(platformParameterRef(s, s.consumerStacks.main!, 'schedulerRoleArn'));
    expect(platformParameterValue(s, 'schedulerRoleArn')).toEqual({ 'Fn::GetAtt': [roleId, 'Arn'] });
  });

  it('keeps cdk-nag clean', () => {
    expect(unacknowledgedNagErrors(s.app)).toEqual([]);
  });
});

describe('the relay lease', () => {
  it('outlives the relay invocation with a margin, and a stage config that breaks it is refused', () => {
    const [[, relay]] = functionsBy(s.stateless, /^Kafka inbox outbox relay/) as [[string, Resource]];
    const lease = Number(relay.Properties.Environment.Variables.LEASE_SECONDS);
    const margin = Number(relay.Properties.Environment.Variables.RELAY_SAFETY_MARGIN_MS) / 1000;
    expect(relay.Properties.Timeout + margin).toBeLessThan(lease);
    expect(() => synthesize({ bundle: false, overrides: { relay: { timeoutSeconds: 120, leaseSeconds: 120 } } })).toThrow(
      /relay: timeoutSeconds \+ safetyMarginSeconds must be below relay\.leaseSeconds \(120\)/,
    );
  });
});

describe('an operator with a name', () => {
  const OPERATORS = [
    { name: 'alice', principalArn: 'arn:aws:iam::123456789012:role/ops/InboxOperatorAlice' },
    { name: 'bob', principalArn: 'arn:aws:iam::123456789012:user/bob' },
  ];
  let named: Synthesized;
  beforeAll(() => {
    named = synthesize({ bundle: false, overrides: { operators: OPERATORS } });
  });
  const opsId = (t: Template) => functionsBy(t, /^Kafka inbox operator commands/)[0]![0];

  it('gives the ops function a URL with AWS_IAM auth, and outputs it', () => {
    const urls = resources(named.platform, 'AWS::Lambda::Url');
    expect(urls.map(([, u]) => u.Properties)).toEqual([
      { AuthType: 'AWS_IAM', TargetFunctionArn: { 'Fn::GetAtt': [opsId(named.platform), 'Arn'] } },
    ]);
    named.platform.hasOutput('OpsFunctionUrl', { Value: { 'Fn::GetAtt': [urls[0]![0], 'FunctionUrl'] } });
  });

  it('lets the declared operators alone call it: InvokeFunctionUrl with AWS_IAM auth, InvokeFunction only through the URL', () => {
    const permissions = resources(named.platform, 'AWS::Lambda::Permission')
      .map(([, p]) => p.Properties)
      .filter((p) => JSON.stringify(p.FunctionName).includes(opsId(named.platform)));

    expect(permissions.map(({ FunctionName: _f, ...p }) => p).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual(
      OPERATORS.flatMap((o) => [
        { Action: 'lambda:InvokeFunction', InvokedViaFunctionUrl: true, Principal: o.principalArn },
        { Action: 'lambda:InvokeFunctionUrl', FunctionUrlAuthType: 'AWS_IAM', Principal: o.principalArn },
      ]).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    );
    // The function checks the caller against the same principals.
    const env = functionsBy(named.platform, /^Kafka inbox operator commands/)[0]![1].Properties.Environment.Variables;
    expect(JSON.parse(env.OPERATOR_PRINCIPALS as string)).toEqual(OPERATORS.map((o) => o.principalArn));
  });

  it('with no operators declared, lets nobody call the URL', () => {
    const permissions = resources(s.platform, 'AWS::Lambda::Permission').filter(([, p]) =>
      JSON.stringify(p.Properties.FunctionName).includes(opsId(s.platform)),
    );
    expect(permissions).toEqual([]);
  });

  it("provisions each operator's database role and lets their principal connect as it, and as nothing else", () => {
    const migrate = functionsBy(named.platform, /^Kafka inbox: apply pending database migrations/)[0]![1];
    expect(migrate.Properties.Environment.Variables.OPERATORS).toBe('alice,bob');
    const connects = resources(named.platform, 'AWS::IAM::Policy')
      .map(([, p]) => p.Properties)
      .filter(
        (p) =>
          JSON.stringify(p.PolicyDocument).includes('rds-db:connect') && (p.Roles ?? p.Users).every((r: unknown) => typeof r === 'string'),
      );
    expect(
      connects.map((p) => ({
        attached: p.Roles ?? p.Users,
        actions: p.PolicyDocument.Statement.map((st: PolicyStatement) => st.Action),
        user: JSON.stringify(p.PolicyDocument.Statement[0].Resource).match(/\/(inbox_[a-z_]+)"/)![1],
      })),
    ).toEqual([
      { attached: ['InboxOperatorAlice'], actions: ['rds-db:connect'], user: 'inbox_ops_alice' },
      { attached: ['bob'], actions: ['rds-db:connect'], user: 'inbox_ops_bob' },
    ]);
  });

  it('refuses an operator named twice, or a principal that is not an IAM role or user', () => {
    expect(() => synthesize({ bundle: false, overrides: { operators: [OPERATORS[0], { ...OPERATORS[1], name: 'alice' }] } })).toThrow(
      /operators\.1\.name: operator "alice" is named twice/,
    );
    expect(() =>
      synthesize({
        bundle: false,
        overrides: { operators: [{ name: 'eve', principalArn: 'arn:aws:sts::123456789012:assumed-role/X/eve' }] },
      }),
    ).toThrow(/operators\.0\.principalArn: must be an IAM role or user ARN/);
  });

  it('passes cdk-nag AwsSolutions with operators declared', () => {
    expect(unacknowledgedNagErrors(named.app)).toEqual([]);
  });
});

describe('the on-failure bucket', () => {
  it('keeps every version for the retention: an ingest role that writes over a batch cannot erase it', () => {
    const [[, bucket]] = resources(s.platform, 'AWS::S3::Bucket') as [[string, Resource]];
    const days = s.config.failedRecordsRetentionDays;
    expect(bucket.Properties.VersioningConfiguration).toEqual({ Status: 'Enabled' });
    expect(bucket.Properties.LifecycleConfiguration.Rules).toEqual([
      { ExpirationInDays: days, NoncurrentVersionExpiration: { NoncurrentDays: days }, Status: 'Enabled' },
      { ExpiredObjectDeleteMarker: true, Status: 'Enabled' },
    ]);
  });
});
