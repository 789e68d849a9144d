/**
 * The alarms (DESIGN.md §7), all sent to one SNS topic. Each description names its runbook
 * section in the README, so whoever is paged knows where to start.
 */
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { MetricNames } from '../../functions/lib/metric-names';
import type { StageConfig } from '../config';
import type { InboxMetrics, MonitoredConsumer, MonitoredFunction } from './monitoring';

/** Runbook section titles, as they appear in the README ("### Runbook: <title>"). */
export const RUNBOOK = {
  quarantineDepth: 'Quarantine depth',
  poisonRecords: 'Poison records',
  oldestDueAge: 'Oldest due age',
  offsetLag: 'Offset lag',
  functionErrors: 'Function errors',
  esmFailedRecords: 'ESM failed records',
  schemaRegistryErrors: 'Schema registry errors',
  outboxUnpublishedAge: 'Outbox unpublished age',
  processingLatency: 'Processing latency',
} as const;

export function runbookReference(section: keyof typeof RUNBOOK): string {
  return `Runbook: README, section "Runbook: ${RUNBOOK[section]}".`;
}

export interface InboxAlarmsProps {
  metrics: InboxMetrics;
  consumers: MonitoredConsumer[];
  functions: MonitoredFunction[];
  thresholds: StageConfig['alarms'];
  topic: sns.ITopic;
}

export class InboxAlarms extends Construct {
  readonly alarms: cloudwatch.Alarm[] = [];

  constructor(scope: Construct, id: string, props: InboxAlarmsProps) {
    super(scope, id);
    const { metrics: m, thresholds: t } = props;
    const action = new actions.SnsAction(props.topic);

    const add = (
      alarmId: string,
      metric: cloudwatch.IMetric,
      threshold: number,
      section: keyof typeof RUNBOOK,
      what: string,
      // No data means nothing happened (counts) or the reaper is not publishing, which
      // the reaper's own error alarm reports.
      treatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ): void => {
      const alarm = new cloudwatch.Alarm(this, alarmId, {
        metric,
        threshold,
        evaluationPeriods: t.evaluationPeriods,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treatMissingData,
        alarmDescription: `${what} ${runbookReference(section)}`,
      });
      alarm.addAlarmAction(action);
      alarm.addOkAction(action);
      this.alarms.push(alarm);
    };

    for (const c of props.consumers) {
      const key = c.name.replace(/[^A-Za-z0-9]/g, '');
      add(
        `${key}QuarantineDepth`,
        m.metric(c.name, MetricNames.QuarantineDepth, 'Maximum'),
        t.quarantineDepth,
        'quarantineDepth',
        `${c.name}: rows are QUARANTINED and wait for an operator.`,
      );
      add(
        `${key}Poison`,
        m.metric(c.name, MetricNames.RecordsPoisoned, 'Sum'),
        t.poisonRecords,
        'poisonRecords',
        `${c.name}: Kafka records could not become inbox rows and were stored as poison.`,
      );
      add(
        `${key}OldestDueAge`,
        m.metric(c.name, MetricNames.OldestDueAgeSeconds, 'Maximum'),
        t.oldestDueAgeSeconds,
        'oldestDueAge',
        `${c.name}: the oldest due row has waited more than ${t.oldestDueAgeSeconds} s.`,
      );
      add(`${key}OffsetLag`, m.offsetLag(c), t.offsetLag, 'offsetLag', `${c.name}: the ingest mapping is more than ${t.offsetLag} records behind.`);
      add(
        `${key}LatencyP50`,
        m.latency(c.name, 'p50', t.latencyMinSamples),
        t.processingLatencyP50Ms,
        'processingLatency',
        `${c.name}: half the events took more than ${t.processingLatencyP50Ms} ms from received to processed (wake-ups not working?).`,
      );
      add(
        `${key}LatencyP99`,
        m.latency(c.name, 'p99', t.latencyMinSamples),
        t.processingLatencyP99Ms,
        'processingLatency',
        `${c.name}: 1 % of the events took more than ${t.processingLatencyP99Ms} ms from received to processed.`,
      );
      add(
        `${key}EsmFailedRecords`,
        m.esmFailedRecords(c),
        t.esmFailedRecords,
        'esmFailedRecords',
        `${c.name}: the event-source mapping gave up on records (on-failure bucket) or dropped them.`,
      );
      if (c.emits) {
        add(
          `${key}OutboxUnpublishedAge`,
          m.metric(c.name, MetricNames.OutboxOldestUnpublishedAgeSeconds, 'Maximum'),
          t.outboxUnpublishedAgeSeconds,
          'outboxUnpublishedAge',
          `${c.name}: an emitted event has waited more than ${t.outboxUnpublishedAgeSeconds} s to be published, or the relay publishes no gauge.`,
          // The relay publishes this gauge every minute: silence means it is not running.
          cloudwatch.TreatMissingData.BREACHING,
        );
      }
      if (c.schemaRegistry) {
        add(
          `${key}SchemaRegistryErrors`,
          m.schemaRegistryErrors(c),
          t.schemaRegistryErrors,
          'schemaRegistryErrors',
          `${c.name}: the event-source mapping could not fetch a schema or validate records against the schema registry; those records never reached the function.`,
        );
      }
    }
    for (const f of props.functions) {
      add(
        `${f.label.replace(/[^A-Za-z0-9]/g, '')}Errors`,
        f.function.metricErrors({ statistic: 'Sum', period: m.period }),
        t.functionErrors,
        'functionErrors',
        `${f.label}: the function returned errors.`,
      );
    }
  }
}
