/**
 * The dashboards. Each consumer stack has one with a row per consumer, then its functions;
 * the platform stack has the overview: totals over every consumer and the worst few
 * consumers per backlog gauge, by SEARCH over the ConsumerName dimension, so that it needs
 * no change (and no widget) when a consumer is added; then the platform's functions and the
 * database. What each consumer row charts is data in dashboard-widgets.ts, which the local
 * run's report draws too.
 */
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as rds from 'aws-cdk-lib/aws-rds';
import { Construct } from 'constructs';
import { MetricNames, type MetricName } from '../../functions/lib/metric-names';
import { FUNCTION_WIDGETS, isInboxSeries, seriesLabel, seriesOf, widgetsOf, type Series, type Stat } from './dashboard-widgets';
import { PERIOD, type InboxMetrics, type MonitoredConsumer, type MonitoredFunction } from './monitoring';

export interface InboxDashboardProps {
  metrics: InboxMetrics;
  consumers: MonitoredConsumer[];
  functions: MonitoredFunction[];
}

const W = 4;
const H = 6;

export class InboxDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: InboxDashboardProps) {
    super(scope, id);
    const { metrics: m } = props;
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard');

    for (const c of props.consumers) {
      const render = (series: Series): cloudwatch.IMetric => {
        if (isInboxSeries(series)) return m.metric(c.name, series.metric, series.stat, seriesLabel(series));
        if (series.aws === 'OffsetLag') return m.offsetLag(c, series.label);
        if (series.aws === 'SchemaRegistryErrors') return m.schemaRegistryErrors(c, series.label);
        return m.esmFailedRecords(c, series.label);
      };
      this.dashboard.addWidgets(
        new cloudwatch.TextWidget({ markdown: `## ${c.name}`, width: 24, height: 1 }),
        ...widgetsOf(c).map(
          (w) =>
            new cloudwatch.GraphWidget({
              title: `${c.name}: ${w.title}`,
              width: W,
              height: H,
              left: seriesOf(w.left, c).map(render),
              ...(w.right ? { right: seriesOf(w.right, c).map(render) } : {}),
              ...(w.leftLabel ? { leftYAxis: { label: w.leftLabel, showUnits: false } } : {}),
              ...(w.rightLabel ? { rightYAxis: { label: w.rightLabel, showUnits: false } } : {}),
            }),
        ),
      );
    }

    this.dashboard.addWidgets(
      new cloudwatch.TextWidget({ markdown: '## Functions and database', width: 24, height: 1 }),
      ...functionWidgets(props.functions),
    );
  }
}

function functionWidgets(functions: MonitoredFunction[]): cloudwatch.GraphWidget[] {
  return FUNCTION_WIDGETS.map(
    (w) =>
      new cloudwatch.GraphWidget({
        title: w.title,
        width: 6,
        height: H,
        left: functions.map((f) => f.function.metric(w.metric, { statistic: w.stat, period: PERIOD, label: f.label })),
      }),
  );
}

/** How many consumers a "worst" widget of the overview shows. */
export const WORST_CONSUMERS = 5;

export interface OverviewDashboardProps {
  metrics: InboxMetrics;
  /** The platform's own functions (reaper, ops, relay). */
  functions: MonitoredFunction[];
  cluster: rds.IDatabaseCluster;
  stageId: string;
}

/** One widget of the overview: the total of a metric over every consumer, or its worst consumers. */
interface OverviewSeries {
  metric: MetricName;
  stat: Stat;
  how: 'total' | 'worst';
  label: string;
}

const OVERVIEW_WIDGETS: readonly { title: string; series: readonly OverviewSeries[] }[] = [
  {
    title: 'All consumers: ingest',
    series: [
      { metric: MetricNames.RecordsReceived, stat: 'Sum', how: 'total', label: 'received' },
      { metric: MetricNames.RecordsInserted, stat: 'Sum', how: 'total', label: 'inserted' },
      { metric: MetricNames.RecordsPoisoned, stat: 'Sum', how: 'total', label: 'poisoned' },
      { metric: MetricNames.BatchItemFailures, stat: 'Sum', how: 'total', label: 'batch item failures' },
    ],
  },
  {
    title: 'All consumers: processing',
    series: [
      { metric: MetricNames.EventsProcessed, stat: 'Sum', how: 'total', label: 'processed' },
      { metric: MetricNames.EventsRetried, stat: 'Sum', how: 'total', label: 'retried' },
      { metric: MetricNames.EventsQuarantined, stat: 'Sum', how: 'total', label: 'quarantined' },
    ],
  },
  {
    title: `Due depth: worst ${WORST_CONSUMERS} consumers`,
    series: [{ metric: MetricNames.DueDepth, stat: 'Maximum', how: 'worst', label: 'due' }],
  },
  {
    title: `Oldest due age (s): worst ${WORST_CONSUMERS} consumers`,
    series: [{ metric: MetricNames.OldestDueAgeSeconds, stat: 'Maximum', how: 'worst', label: 'oldest due age' }],
  },
  {
    title: `Quarantine depth: worst ${WORST_CONSUMERS} consumers`,
    series: [{ metric: MetricNames.QuarantineDepth, stat: 'Maximum', how: 'worst', label: 'quarantined' }],
  },
  {
    title: `Poisoned records: worst ${WORST_CONSUMERS} consumers`,
    series: [{ metric: MetricNames.RecordsPoisoned, stat: 'Sum', how: 'worst', label: 'poisoned' }],
  },
  {
    title: `Latency p99 (ms): worst ${WORST_CONSUMERS} consumers`,
    series: [{ metric: MetricNames.ProcessingLatency, stat: 'p99', how: 'worst', label: 'latency p99' }],
  },
  { title: 'Paused consumers', series: [{ metric: MetricNames.ConsumerPaused, stat: 'Maximum', how: 'worst', label: 'paused' }] },
];

export class OverviewDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: OverviewDashboardProps) {
    super(scope, id);
    const { metrics: m } = props;
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard');
    const render = (s: OverviewSeries): cloudwatch.IMetric => {
      const search = m.searchAllConsumers(s.metric, s.stat);
      return new cloudwatch.MathExpression({
        expression: s.how === 'total' ? `SUM(${search})` : `SORT(${search}, MAX, DESC, ${WORST_CONSUMERS})`,
        usingMetrics: {},
        period: PERIOD,
        label: s.how === 'total' ? `${s.label} (all consumers)` : '',
      });
    };
    this.dashboard.addWidgets(
      new cloudwatch.TextWidget({
        markdown: `## ${props.stageId}: every consumer\nTotals and the worst consumers; each consumer's detail is on the dashboard of its consumer stack.`,
        width: 24,
        height: 2,
      }),
      ...OVERVIEW_WIDGETS.map((w) => new cloudwatch.GraphWidget({ title: w.title, width: 6, height: H, left: w.series.map(render) })),
      new cloudwatch.TextWidget({ markdown: '## Platform functions and database', width: 24, height: 1 }),
      ...functionWidgets(props.functions),
      new cloudwatch.GraphWidget({
        title: 'Aurora',
        width: 6,
        height: H,
        left: [props.cluster.metric('ServerlessDatabaseCapacity', { statistic: 'Maximum', period: PERIOD, label: 'capacity (ACU)' })],
        right: [props.cluster.metricDatabaseConnections({ statistic: 'Maximum', period: PERIOD, label: 'connections' })],
      }),
    );
  }
}
