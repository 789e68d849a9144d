/** One CloudWatch dashboard per deployment (DESIGN.md §7). */
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as rds from 'aws-cdk-lib/aws-rds';
import { Construct } from 'constructs';
import { MetricNames } from '../../functions/lib/metric-names';
import { PERIOD, type InboxMetrics, type MonitoredConsumer, type MonitoredFunction } from './monitoring';

export interface InboxDashboardProps {
  metrics: InboxMetrics;
  consumers: MonitoredConsumer[];
  functions: MonitoredFunction[];
  cluster: rds.DatabaseCluster;
}

const W = 6;
const H = 6;

export class InboxDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: InboxDashboardProps) {
    super(scope, id);
    const { metrics: m } = props;
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard');

    for (const c of props.consumers) {
      const sum = (name: (typeof MetricNames)[keyof typeof MetricNames]) => m.metric(c.name, name, 'Sum');
      this.dashboard.addWidgets(
        new cloudwatch.TextWidget({ markdown: `## ${c.name}`, width: 24, height: 1 }),
        new cloudwatch.GraphWidget({
          title: `${c.name}: ingest`,
          width: W,
          height: H,
          left: [
            sum(MetricNames.RecordsReceived),
            sum(MetricNames.RecordsInserted),
            sum(MetricNames.RecordsDuplicate),
            sum(MetricNames.RecordsPoisoned),
            sum(MetricNames.BatchItemFailures),
          ],
        }),
        new cloudwatch.GraphWidget({
          title: `${c.name}: processing`,
          width: W,
          height: H,
          left: [
            sum(MetricNames.EventsProcessed),
            sum(MetricNames.EventsRetried),
            sum(MetricNames.EventsQuarantined),
            sum(MetricNames.EventsIgnored),
          ],
          right: [
            m.metric(c.name, MetricNames.ProcessingLatency, 'p50', 'latency p50'),
            m.metric(c.name, MetricNames.ProcessingLatency, 'p99', 'latency p99'),
          ],
        }),
        new cloudwatch.GraphWidget({
          title: `${c.name}: backlog`,
          width: W,
          height: H,
          left: [
            m.metric(c.name, MetricNames.DueDepth, 'Maximum'),
            m.metric(c.name, MetricNames.QuarantineDepth, 'Maximum'),
            m.metric(c.name, MetricNames.PoisonLastHour, 'Maximum'),
          ],
          right: [m.metric(c.name, MetricNames.OldestDueAgeSeconds, 'Maximum')],
        }),
        new cloudwatch.GraphWidget({
          title: `${c.name}: Kafka`,
          width: W,
          height: H,
          left: [m.offsetLag(c)],
          right: [m.esmFailedRecords(c), ...(c.schemaRegistry ? [m.schemaRegistryErrors(c)] : [])],
        }),
        new cloudwatch.GraphWidget({
          title: `${c.name}: reaper`,
          width: W,
          height: H,
          left: [sum(MetricNames.StaleLeasesReleased), sum(MetricNames.RowsPurged), sum(MetricNames.PayloadsPurged)],
        }),
      );
      if (c.emits) {
        this.dashboard.addWidgets(
          new cloudwatch.GraphWidget({
            title: `${c.name}: outbox`,
            width: W,
            height: H,
            left: [m.metric(c.name, MetricNames.OutboxDepth, 'Maximum', 'unpublished (depth)')],
            right: [m.metric(c.name, MetricNames.OutboxOldestUnpublishedAgeSeconds, 'Maximum', 'oldest unpublished age (s)')],
          }),
          new cloudwatch.GraphWidget({
            title: `${c.name}: relay`,
            width: W,
            height: H,
            left: [sum(MetricNames.OutboxEventsPublished), sum(MetricNames.OutboxPublishRefused), sum(MetricNames.OutboxRowsPurged)],
          }),
        );
      }
    }

    const perFunction = (metricName: string, statistic: string) =>
      props.functions.map((f) => f.function.metric(metricName, { statistic, period: PERIOD, label: f.label }));
    this.dashboard.addWidgets(
      new cloudwatch.TextWidget({ markdown: '## Functions and database', width: 24, height: 1 }),
      new cloudwatch.GraphWidget({ title: 'Lambda errors', width: W, height: H, left: perFunction('Errors', 'Sum') }),
      new cloudwatch.GraphWidget({ title: 'Lambda throttles', width: W, height: H, left: perFunction('Throttles', 'Sum') }),
      new cloudwatch.GraphWidget({ title: 'Lambda duration p99 (ms)', width: W, height: H, left: perFunction('Duration', 'p99') }),
      new cloudwatch.GraphWidget({
        title: 'Aurora',
        width: W,
        height: H,
        left: [props.cluster.metricServerlessDatabaseCapacity({ statistic: 'Maximum', period: PERIOD, label: 'capacity (ACU)' })],
        right: [props.cluster.metricDatabaseConnections({ statistic: 'Maximum', period: PERIOD, label: 'connections' })],
      }),
    );
  }
}
