/**
 * The alarms, all sent to one SNS topic. Each description names its runbook section in
 * docs/runbooks.md, so whoever is paged knows where to start.
 *
 * Silence pages too. Counts that nobody emits are "nothing happened" (missing data does not
 * breach); but a scheduled function that stops running emits nothing at all, and with it
 * every gauge and count it would have published. So each scheduled function — every
 * worker, the reaper, the relay — has a heartbeat alarm on its completed invocations
 * (Invocations − Errors, missing data breaching). The backlog gauges (due depth, oldest due
 * age, quarantine depth) are the reaper's alone: the reaper's heartbeat covers them, one
 * page that says the gauges are blind rather than one per gauge and consumer. A paused
 * consumer's silence is deliberate: its worker's heartbeat pages only while the reaper does
 * not report it paused (a composite alarm), and its growing backlog does not page either.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as rds from 'aws-cdk-lib/aws-rds';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { MetricNames } from '../../functions/lib/metric-names';
import type { StageConfig } from '../config';
import { connectionsAlarmThreshold, maxConnectionsOf } from '../connection-budget';
import type { InboxMetrics, MonitoredConsumer, MonitoredFunction } from './monitoring';

/** Runbook section titles, as they appear in docs/runbooks.md ("## Runbook: <title>"). */
export const RUNBOOK = {
  quarantineDepth: 'Quarantine depth',
  poisonRecords: 'Poison records',
  oldestDueAge: 'Oldest due age',
  offsetLag: 'Offset lag',
  functionErrors: 'Function errors',
  functionSilent: 'Function silent',
  functionThrottles: 'Function throttles',
  failedInvocations: 'Failed invocations',
  esmFailedRecords: 'ESM failed records',
  schemaRegistryErrors: 'Schema registry errors',
  schemaRegistryUnavailable: 'Schema registry unavailable',
  outboxUnpublishedAge: 'Outbox unpublished age',
  processingLatency: 'Processing latency',
  databaseCapacity: 'Database capacity',
  databaseConnections: 'Database connections',
  databaseMemory: 'Database memory',
  permissionDenied: 'Permission denied',
} as const;

export function runbookReference(section: keyof typeof RUNBOOK): string {
  return `Runbook: docs/runbooks.md, section "Runbook: ${RUNBOOK[section]}".`;
}

/** A function invoked on a schedule, whose silence must page. */
export interface ScheduledFunction {
  label: string;
  function: lambda.IFunction;
  intervalMinutes: number;
  /** A worker's consumer: its silence is expected while the consumer is paused. */
  consumer?: string;
}

/** A queue of failed deliveries or invocations, and what it holds. */
export interface FailureQueue {
  label: string;
  queue: sqs.IQueue;
}

export interface InboxAlarmsProps {
  metrics: InboxMetrics;
  consumers: MonitoredConsumer[];
  functions: MonitoredFunction[];
  scheduled: ScheduledFunction[];
  failureQueues: FailureQueue[];
  /** The database's alarms: the platform stack's alone. */
  database?: { cluster: rds.IDatabaseCluster; config: Pick<StageConfig, 'database' | 'alarms'> };
  thresholds: StageConfig['alarms'];
  topic: sns.ITopic;
}

/** Memory per Aurora Serverless v2 capacity unit. */
const ACU_BYTES = 2 * 1024 ** 3;

const idOf = (label: string) => label.replace(/[^A-Za-z0-9]/g, '');

export class InboxAlarms extends Construct {
  /** The alarms that notify (the topic is their action). */
  readonly alarms: (cloudwatch.Alarm | cloudwatch.CompositeAlarm)[] = [];

  private readonly action: actions.SnsAction;
  private readonly metrics: InboxMetrics;
  private readonly thresholds: StageConfig['alarms'];

  constructor(scope: Construct, id: string, props: InboxAlarmsProps) {
    super(scope, id);
    this.metrics = props.metrics;
    this.thresholds = props.thresholds;
    this.action = new actions.SnsAction(props.topic);

    for (const c of props.consumers) this.consumerAlarms(c);
    for (const f of props.functions) this.functionAlarms(f);
    for (const s of props.scheduled) this.heartbeat(s, props);
    for (const q of props.failureQueues) this.failureQueueAlarm(q);
    if (props.database !== undefined) this.databaseAlarms(props.database);
  }

  /**
   * A consumer's alarms: its backlog, its mapping, its latency; its outbox when it emits,
   * its schema registry when it has one.
   */
  private consumerAlarms(c: MonitoredConsumer): void {
    const { metrics: m, thresholds: t } = this;
    const key = idOf(c.name);
    this.add(
      `${key}QuarantineDepth`,
      m.metric(c.name, MetricNames.QuarantineDepth, 'Maximum'),
      t.quarantineDepth,
      'quarantineDepth',
      `${c.name}: rows are QUARANTINED and wait for an operator.`,
    );
    this.add(
      `${key}Poison`,
      m.metric(c.name, MetricNames.RecordsPoisoned, 'Sum'),
      t.poisonRecords,
      'poisonRecords',
      `${c.name}: Kafka records could not become inbox rows and were stored as poison.`,
    );
    this.add(
      `${key}OldestDueAge`,
      m.unlessPaused(c.name, m.metric(c.name, MetricNames.OldestDueAgeSeconds, 'Maximum'), 'oldest due age'),
      t.oldestDueAgeSeconds,
      'oldestDueAge',
      `${c.name}: the oldest due row has waited more than ${t.oldestDueAgeSeconds} s (not while the consumer is paused).`,
    );
    this.add(
      `${key}OffsetLag`,
      m.offsetLag(c),
      t.offsetLag,
      'offsetLag',
      `${c.name}: the ingest mapping is more than ${t.offsetLag} records behind.`,
    );
    this.add(
      `${key}LatencyP50`,
      m.latency(c.name, 'p50', t.latencyMinSamples),
      t.processingLatencyP50Ms,
      'processingLatency',
      `${c.name}: half the events took more than ${t.processingLatencyP50Ms} ms from received to processed (wake-ups not working?).`,
    );
    this.add(
      `${key}LatencyP99`,
      m.latency(c.name, 'p99', t.latencyMinSamples),
      t.processingLatencyP99Ms,
      'processingLatency',
      `${c.name}: 1 % of the events took more than ${t.processingLatencyP99Ms} ms from received to processed.`,
    );
    this.add(
      `${key}EsmFailedRecords`,
      m.esmFailedRecords(c),
      t.esmFailedRecords,
      'esmFailedRecords',
      `${c.name}: the event-source mapping gave up on records (on-failure bucket) or dropped them.`,
    );
    // Any row at all: a missing grant fails every row it touches until a deploy grants it.
    this.add(
      `${key}PermissionDenied`,
      m.metric(c.name, MetricNames.PermissionDenied, 'Sum'),
      0,
      'permissionDenied',
      `${c.name}: rows were QUARANTINED DB_PERMISSION: its database role lacks a grant its handlers use (the table is in each row's error_detail.deniedOn and the log line).`,
    );
    if (c.emits) this.outboxAlarm(c);
    if (c.schemaRegistry) this.schemaRegistryAlarms(c);
  }

  private outboxAlarm(c: MonitoredConsumer): void {
    const { metrics: m, thresholds: t } = this;
    const key = idOf(c.name);
    // The relay publishes this gauge every minute: silence means it is not running.
    this.alarm(
      `${key}OutboxUnpublishedAge`,
      {
        metric: m.metric(c.name, MetricNames.OutboxOldestUnpublishedAgeSeconds, 'Maximum'),
        threshold: t.outboxUnpublishedAgeSeconds,
        evaluationPeriods: t.evaluationPeriods,
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      },
      'outboxUnpublishedAge',
      `${c.name}: an emitted event has waited more than ${t.outboxUnpublishedAgeSeconds} s to be published, or the relay publishes no gauge.`,
    );
  }

  private schemaRegistryAlarms(c: MonitoredConsumer): void {
    const { metrics: m, thresholds: t } = this;
    const key = idOf(c.name);
    this.add(
      `${key}SchemaRegistryErrors`,
      m.schemaRegistryErrors(c),
      t.schemaRegistryErrors,
      'schemaRegistryErrors',
      `${c.name}: the event-source mapping could not fetch a schema or validate records against the schema registry; those records never reached the function.`,
    );
    // The function's own lookups: a record it could not read for want of the registry is
    // handed back, and its partition waits; the threshold is the mapping's (schemaRegistryErrors).
    this.add(
      `${key}SchemaRegistryUnavailable`,
      m.metric(c.name, MetricNames.SchemaRegistryUnavailable, 'Sum'),
      t.schemaRegistryErrors,
      'schemaRegistryUnavailable',
      `${c.name}: the ingest function could not read writer schemas from the schema registry; those records were handed back and their partitions wait.`,
    );
  }

  private functionAlarms(f: MonitoredFunction): void {
    const { metrics: m, thresholds: t } = this;
    const key = idOf(f.label);
    this.add(
      `${key}Errors`,
      f.function.metricErrors({ statistic: 'Sum', period: m.period }),
      t.functionErrors,
      'functionErrors',
      `${f.label}: the function returned errors.`,
    );
    this.add(
      `${key}Throttles`,
      f.function.metricThrottles({ statistic: 'Sum', period: m.period }),
      t.functionThrottles,
      'functionThrottles',
      `${f.label}: Lambda throttled invocations (reserved or account concurrency exhausted).`,
    );
  }

  private failureQueueAlarm(q: FailureQueue): void {
    const { metrics: m, thresholds: t } = this;
    this.add(
      `${idOf(q.label)}Messages`,
      q.queue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: m.period }),
      t.failedInvocations,
      'failedInvocations',
      `${q.label} holds messages: invocations that never ran or failed, kept for inspection.`,
    );
  }

  /**
   * The database's alarms: capacity, connections, freeable memory. The connections alarm
   * fires where the stage's connection budget ends (cdk/connection-budget.ts), against the
   * writer's real max_connections (the 2,000 cap included).
   */
  private databaseAlarms(database: NonNullable<InboxAlarmsProps['database']>): void {
    const { metrics: m, thresholds: t } = this;
    const { cluster, config } = database;
    const { maxCapacityAcu } = config.database;
    const maxConnections = maxConnectionsOf(config);
    this.add(
      'DatabaseCapacity',
      cluster.metric('ACUUtilization', { statistic: 'Maximum', period: m.period }),
      t.databaseCapacityPercent,
      'databaseCapacity',
      `Aurora: capacity above ${t.databaseCapacityPercent} % of its maximum (${maxCapacityAcu} ACU).`,
    );
    this.add(
      'DatabaseConnections',
      cluster.metricDatabaseConnections({ statistic: 'Maximum', period: m.period }),
      connectionsAlarmThreshold(config),
      'databaseConnections',
      `Aurora: connections above the stage's connection budget, ${t.databaseConnectionsPercent} % of max_connections (${maxConnections.value}: ${maxConnections.basis}).`,
    );
    const memoryFloor = Math.floor((maxCapacityAcu * ACU_BYTES * t.databaseFreeableMemoryPercent) / 100);
    this.alarm(
      'DatabaseFreeableMemory',
      {
        metric: cluster.metricFreeableMemory({ statistic: 'Minimum', period: m.period }),
        threshold: memoryFloor,
        evaluationPeriods: t.evaluationPeriods,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      },
      'databaseMemory',
      `Aurora: freeable memory below ${t.databaseFreeableMemoryPercent} % of the memory at its maximum capacity (${memoryFloor} bytes).`,
    );
  }

  /**
   * An alarm over a threshold. No data means nothing happened (counts), or that the function
   * publishing it is silent, which its heartbeat reports.
   */
  private add(alarmId: string, metric: cloudwatch.IMetric, threshold: number, section: keyof typeof RUNBOOK, what: string): void {
    this.alarm(alarmId, { metric, threshold, evaluationPeriods: this.thresholds.evaluationPeriods }, section, what);
  }

  /**
   * A scheduled function's heartbeat: completed invocations (Invocations − Errors) over
   * periods at least as long as its schedule's interval; missing data breaches. A worker's
   * pages through a composite alarm that holds it back while its consumer is paused.
   */
  private heartbeat(s: ScheduledFunction, props: InboxAlarmsProps): void {
    const { metrics: m, thresholds: t } = props;
    const key = idOf(s.label);
    const period = Duration.minutes(Math.max(m.period.toMinutes(), s.intervalMinutes));
    const completed = new cloudwatch.MathExpression({
      // Lambda publishes Errors beside Invocations; FILL only guards a period where it did not.
      expression: 'invocations - FILL(errors, 0)',
      usingMetrics: {
        invocations: s.function.metricInvocations({ statistic: 'Sum', period }),
        errors: s.function.metricErrors({ statistic: 'Sum', period }),
      },
      period,
      label: `${s.label} completed invocations`,
    });
    const silentFor = `${t.heartbeatPeriods} × ${period.toMinutes()} min`;
    const what = `${s.label}: completed no invocation for ${silentFor}; everything it publishes is missing too.`;
    const heartbeat = {
      metric: completed,
      threshold: 1,
      evaluationPeriods: t.heartbeatPeriods,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    };
    if (s.consumer === undefined) {
      this.alarm(`${key}Heartbeat`, heartbeat, 'functionSilent', what);
      return;
    }
    // The worker of a consumer: silent on purpose while paused (ops pause disables its
    // schedule). The reaper reports the pause every minute; a pause it stopped reporting
    // keeps its last state (the reaper's own heartbeat pages for that).
    const silent = new cloudwatch.Alarm(this, `${key}Silent`, {
      ...heartbeat,
      alarmDescription: `${what} Notifies through ${key}Heartbeat, unless the consumer is paused.`,
    });
    const paused = new cloudwatch.Alarm(this, `${key}Paused`, {
      metric: m.metric(s.consumer, MetricNames.ConsumerPaused, 'Maximum'),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.IGNORE,
      alarmDescription: `${s.consumer} is paused (ops pause): holds back ${key}Heartbeat. Notifies nobody.`,
    });
    const composite = new cloudwatch.CompositeAlarm(this, `${key}Heartbeat`, {
      alarmRule: cloudwatch.AlarmRule.allOf(
        cloudwatch.AlarmRule.fromAlarm(silent, cloudwatch.AlarmState.ALARM),
        cloudwatch.AlarmRule.not(cloudwatch.AlarmRule.fromAlarm(paused, cloudwatch.AlarmState.ALARM)),
      ),
      alarmDescription: `${what} Not while ${s.consumer} is paused. ${runbookReference('functionSilent')}`,
    });
    this.notify(composite);
  }

  private alarm(
    alarmId: string,
    props: Omit<cloudwatch.AlarmProps, 'alarmDescription' | 'comparisonOperator' | 'treatMissingData'> &
      Partial<Pick<cloudwatch.AlarmProps, 'comparisonOperator' | 'treatMissingData'>>,
    section: keyof typeof RUNBOOK,
    what: string,
  ): void {
    this.notify(
      new cloudwatch.Alarm(this, alarmId, {
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        ...props,
        alarmDescription: `${what} ${runbookReference(section)}`,
      }),
    );
  }

  private notify(alarm: cloudwatch.Alarm | cloudwatch.CompositeAlarm): void {
    alarm.addAlarmAction(this.action);
    alarm.addOkAction(this.action);
    this.alarms.push(alarm);
  }
}
