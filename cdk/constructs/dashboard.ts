/**
 * One CloudWatch dashboard per deployment (DESIGN.md §7): a row per consumer, then the
 * functions and the database. What each widget charts is data in dashboard-widgets.ts,
 * which the local run's report draws too.
 */
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as rds from 'aws-cdk-lib/aws-rds';
import { Construct } from 'constructs';
import { FUNCTION_WIDGETS, isInboxSeries, seriesLabel, seriesOf, widgetsOf, type Series } from './dashboard-widgets';
import { PERIOD, type InboxMetrics, type MonitoredConsumer, type MonitoredFunction } from './monitoring';

export interface InboxDashboardProps {
  metrics: InboxMetrics;
  consumers: MonitoredConsumer[];
  functions: MonitoredFunction[];
  cluster: rds.IDatabaseCluster;
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
      ...FUNCTION_WIDGETS.map(
        (w) =>
          new cloudwatch.GraphWidget({
            title: w.title,
            width: 6,
            height: H,
            left: props.functions.map((f) => f.function.metric(w.metric, { statistic: w.stat, period: PERIOD, label: f.label })),
          }),
      ),
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
