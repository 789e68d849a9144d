/**
 * The dev stage of the three shipped consumers, before and after the platform/consumer split:
 * the same resources, apart from what the split moves. The fixture lists the resources the
 * single stateless stack had (type and logical id); the platform stack keeps the shared ones
 * under the same logical ids (so CloudFormation keeps them), the consumer stack "main" creates
 * the consumers' (same logical ids, a new stack: they are replaced once), and the test names
 * everything else.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { SHIPPED_CONSUMERS } from './many-consumers';
import { synthesize, type Synthesized } from './synth';

const BEFORE = JSON.parse(readFileSync(new URL('../fixtures/cdk/dev-stateless-before-split.json', import.meta.url), 'utf8')) as [
  string,
  string,
][];

let s: Synthesized;
beforeAll(() => {
  // The three consumers of the stage before the split, as its fixtures: consumers added since are not in the recorded template.
  s = synthesize({ bundle: false, consumers: SHIPPED_CONSUMERS });
});

const key = ([type, id]: [string, string]) => `${type} ${id}`;
const resourcesIn = (t: { toJSON(): { [k: string]: any } }) =>
  Object.entries(t.toJSON().Resources as Record<string, { Type: string }>).map(([id, r]) => `${r.Type} ${id}`);

/** A consumer's resources are under its construct (CaseProjection…) or its alarms' (Alarmscaseprojection…). */
const OF_A_CONSUMER =
  /^[A-Za-z:]+ (CaseProjection|CaseSla|NotificationService|Alarmscaseprojection|Alarmscasesla|Alarmsnotificationservice)/;

/**
 * The outbox relay the single stack had (one for every emitting consumer): now one per
 * emitting consumer, in that consumer's stack (its own database role), with its alarms and
 * the stack's broker lookup; new logical ids, so replaced.
 */
const THE_SHARED_RELAY = /^[A-Za-z:]+ (OutboxRelay|Alarmsoutboxrelay)/;
const CASE_SLA_RELAY = [
  'AWS::CloudWatch::Alarm AlarmsoutboxrelaycaseslaErrors',
  'AWS::CloudWatch::Alarm AlarmsoutboxrelaycaseslaHeartbeat',
  'AWS::CloudWatch::Alarm AlarmsoutboxrelaycaseslaThrottles',
  'AWS::IAM::Policy OutboxRelayBootstrapBrokersCustomResourcePolicy',
  'AWS::IAM::Policy OutboxRelayCaseSlaFunctionServiceRoleDefaultPolicy',
  'AWS::IAM::Role OutboxRelayCaseSlaFunctionServiceRole',
  'AWS::Lambda::EventInvokeConfig OutboxRelayCaseSlaFunctionEventInvokeConfig',
  'AWS::Lambda::Function OutboxRelayCaseSlaFunction',
  'AWS::Logs::LogGroup OutboxRelayBootstrapBrokersLogs',
  'AWS::Logs::LogGroup OutboxRelayCaseSlaFunctionLogs',
  'AWS::Scheduler::Schedule OutboxRelayCaseSlaSchedule',
  'Custom::AWS OutboxRelayBootstrapBrokers',
];

/** Logical ids that carry a hash of what they belong to: named without it. */
const normalized = (r: string) =>
  r
    .replace(/(KafkaEventSource)[A-Za-z0-9]+$/, '$1…')
    .replace(/(CurrentVersion)[0-9A-Fa-f]+$/, '$1…')
    .replace(/[0-9A-F]{8}$/, '');

describe('the dev stage of three consumers, split', () => {
  it("keeps every shared resource in the platform stack and moves each consumer's into the consumer stack, under the same logical ids", () => {
    const platform = new Set(resourcesIn(s.platform));
    const main = new Set(resourcesIn(s.consumerStacks.main!));
    const stayed = BEFORE.map(key).filter((r) => platform.has(r));
    const moved = BEFORE.map(key).filter((r) => main.has(r));
    const gone = BEFORE.map(key).filter((r) => !platform.has(r) && !main.has(r));
    console.log(`moved to KafkaInbox-dev-consumers-main (${moved.length}):\n  ${moved.join('\n  ')}`);
    console.log(`replaced (${gone.length}):\n  ${gone.join('\n  ')}`);

    // Everything of a consumer moved; nothing else did, but the dashboard: the platform's is
    // the overview now, and the consumer stack has its own under the same logical id.
    // So did the provider of the relay's broker lookup (CDK's stack-wide singleton), with the relay.
    expect(moved.filter((r) => !OF_A_CONSUMER.test(r)).sort()).toEqual([
      expect.stringMatching(/^AWS::CloudWatch::Dashboard Dashboard/),
      expect.stringMatching(/^AWS::IAM::Role AWS679f53fac002430cb0da5b7982bd2287ServiceRole/),
      expect.stringMatching(/^AWS::Lambda::Function AWS679f53fac002430cb0da5b7982bd2287/),
    ]);
    expect(moved.length).toBeGreaterThan(70);
    expect(stayed.filter((r) => OF_A_CONSUMER.test(r))).toEqual([]);
    // Replaced: the shared relay (above), an event-source mapping's logical id includes its
    // stack's name, and the migration function's version hash its trigger's.
    expect(gone.filter((r) => THE_SHARED_RELAY.test(r))).toHaveLength(12);
    expect(
      gone
        .filter((r) => !THE_SHARED_RELAY.test(r))
        .map(normalized)
        .sort(),
    ).toEqual(
      [
        'AWS::Lambda::EventSourceMapping CaseProjectionIngestFunctionKafkaEventSource…',
        'AWS::Lambda::EventSourceMapping CaseSlaIngestFunctionKafkaEventSource…',
        'AWS::Lambda::EventSourceMapping NotificationServiceIngestFunctionKafkaEventSource…',
        'AWS::Lambda::Version MigrationsFunctionCurrentVersion…',
      ].sort(),
    );
  });

  it("adds only the parameters the stacks share, the consumers' directory entries, and the replacements", () => {
    const before = new Set(BEFORE.map(key));
    const added = [
      ...resourcesIn(s.platform)
        .filter((r) => !before.has(r))
        .map((r) => `platform: ${normalized(r)}`),
      ...resourcesIn(s.consumerStacks.main!)
        .filter((r) => !before.has(r))
        .map((r) => `main: ${normalized(r)}`),
    ];
    expect(added.sort()).toEqual(
      [
        ...[
          'failedRecordsBucketArn',
          'scheduleGroupName',
          'schedulerRoleArn',
          'schedulesDeadLetterQueueArn',
          'failedInvocationsQueueArn',
          'alarmTopicArn',
        ].map((k) => `platform: AWS::SSM::Parameter Parameter${k}`),
        'platform: AWS::Lambda::Version MigrationsFunctionCurrentVersion…',
        // Added since: the operators' way in (docs/ops.md, "Who did it").
        'platform: AWS::Lambda::Url OpsFunctionFunctionUrl',
        ...['CaseProjection', 'CaseSla', 'NotificationService'].flatMap((c) => [
          `main: AWS::SSM::Parameter ${c}DirectoryEntry`,
          `main: AWS::Lambda::EventSourceMapping ${c}IngestFunctionKafkaEventSource…`,
        ]),
        // Added since: the alarm on a missing grant (docs/consumers.md, "Runbook: Permission denied").
        ...['caseprojection', 'casesla', 'notificationservice'].map((c) => `main: AWS::CloudWatch::Alarm Alarms${c}PermissionDenied`),
        ...CASE_SLA_RELAY.map((r) => `main: ${r}`),
      ].sort(),
    );
  });

  it("keeps each consumer's mappings on the same topics and consumer groups, so they resume from the committed offsets", () => {
    const mappings = Object.values(s.consumerStacks.main!.findResources('AWS::Lambda::EventSourceMapping')).map((m) => [
      m.Properties.Topics[0],
      m.Properties.AmazonManagedKafkaEventSourceConfig.ConsumerGroupId,
    ]);
    expect(mappings.sort()).toEqual([
      ['payment.completed', 'notification-service'],
      ['regulatory.case.events.v1', 'case-projection'],
      ['regulatory.case.events.v1', 'case-sla'],
    ]);
  });
});
