/**
 * What the dashboard charts, as plain data: one source for the CloudWatch dashboard
 * (dashboard.ts renders it with CDK constructs) and for the local run's report
 * (tools/local/html-report.ts draws it from the metrics the functions emitted locally).
 *
 * Our own metrics are named only through functions/lib/metric-names.ts, so neither can
 * chart a metric nobody emits. Series that AWS itself publishes (the event-source
 * mapping's offset lag, Lambda's errors, Aurora's capacity) exist only in AWS: the
 * dashboard charts them, the local report says it cannot.
 *
 * No aws-cdk-lib import here: the report reads this module outside any CDK app.
 */
import { MetricNames, type MetricName } from '../../functions/lib/metric-names';

/** CloudWatch statistics the widgets use; the report computes the same over its buckets. */
export type Stat = 'Sum' | 'Maximum' | 'Average' | 'p50' | 'p95' | 'p99';

/** One of our metrics, for the widget's consumer (dimension ConsumerName). */
export interface InboxSeries {
  metric: MetricName;
  stat: Stat;
  /** Defaults to the metric name. */
  label?: string;
}

/** A metric of the consumer's event-source mappings or ingest function, published by AWS. */
export interface AwsSeries {
  aws: 'OffsetLag' | 'EsmFailedRecords' | 'SchemaRegistryErrors';
  label: string;
  /** Charted only for a consumer that declares a schema registry (its mappings alone publish it). */
  withSchemaRegistry?: true;
}

export type Series = InboxSeries | AwsSeries;

export interface ConsumerWidget {
  /** Stable id (report element ids, tests). */
  id: string;
  /** Shown as "<consumer>: <title>". */
  title: string;
  left: readonly Series[];
  right?: readonly Series[];
  leftLabel?: string;
  rightLabel?: string;
  /** Charted only for a consumer whose declaration emits events (the relay's outbox). */
  whenEmits?: true;
}

/** A metric of every function (dimension FunctionName), published by AWS. */
export interface FunctionWidget {
  title: string;
  metric: 'Errors' | 'Throttles' | 'Duration' | 'ConcurrentExecutions';
  stat: Stat;
}

/** CloudWatch's period for every widget and alarm. The report picks its own (seconds). */
export const DASHBOARD_PERIOD_MINUTES = 5;

const sum = (metric: MetricName): InboxSeries => ({ metric, stat: 'Sum' });
const max = (metric: MetricName): InboxSeries => ({ metric, stat: 'Maximum' });

/** The widgets of each consumer's row, in order. */
export const CONSUMER_WIDGETS: readonly ConsumerWidget[] = [
  {
    id: 'ingest',
    title: 'ingest',
    leftLabel: 'records',
    left: [
      sum(MetricNames.RecordsReceived),
      sum(MetricNames.RecordsInserted),
      sum(MetricNames.RecordsDuplicate),
      sum(MetricNames.RecordsPoisoned),
      sum(MetricNames.BatchItemFailures),
    ],
  },
  {
    id: 'processing',
    title: 'processing',
    leftLabel: 'events',
    left: [
      sum(MetricNames.EventsProcessed),
      sum(MetricNames.EventsRetried),
      sum(MetricNames.EventsQuarantined),
      sum(MetricNames.EventsIgnored),
    ],
  },
  {
    id: 'latency',
    title: 'latency received → processed',
    leftLabel: 'ms',
    left: [
      { metric: MetricNames.ProcessingLatency, stat: 'p50', label: 'latency p50' },
      { metric: MetricNames.ProcessingLatency, stat: 'p95', label: 'latency p95' },
      { metric: MetricNames.ProcessingLatency, stat: 'p99', label: 'latency p99' },
    ],
  },
  {
    // Who woke the worker, how often that failed (the schedule then runs it anyway), and
    // whether an operator paused it (then nobody wakes it and nothing is processed).
    id: 'wake-ups',
    title: 'wake-ups and pause',
    leftLabel: 'invocations',
    left: [sum(MetricNames.WakeUpsSent), sum(MetricNames.FanOutsSent), sum(MetricNames.HandOversSent), sum(MetricNames.WakeUpFailures)],
    rightLabel: 'paused (1)',
    right: [{ metric: MetricNames.ConsumerPaused, stat: 'Maximum', label: 'paused' }],
  },
  {
    id: 'backlog',
    title: 'backlog',
    leftLabel: 'rows',
    left: [max(MetricNames.DueDepth), max(MetricNames.QuarantineDepth), max(MetricNames.HeldDepth), max(MetricNames.PoisonLastHour)],
    rightLabel: 'seconds',
    right: [max(MetricNames.OldestDueAgeSeconds)],
  },
  {
    id: 'kafka',
    title: 'Kafka',
    left: [{ aws: 'OffsetLag', label: 'offset lag' }],
    right: [
      { aws: 'EsmFailedRecords', label: 'records sent to on-failure or dropped' },
      { aws: 'SchemaRegistryErrors', label: 'schema registry errors', withSchemaRegistry: true },
    ],
  },
  {
    id: 'outbox',
    title: 'outbox',
    whenEmits: true,
    leftLabel: 'rows',
    left: [{ metric: MetricNames.OutboxDepth, stat: 'Maximum', label: 'unpublished (depth)' }],
    rightLabel: 'seconds',
    right: [{ metric: MetricNames.OutboxOldestUnpublishedAgeSeconds, stat: 'Maximum', label: 'oldest unpublished age' }],
  },
  {
    id: 'relay',
    title: 'relay',
    whenEmits: true,
    leftLabel: 'events',
    left: [sum(MetricNames.OutboxEventsPublished), sum(MetricNames.OutboxPublishRefused), sum(MetricNames.OutboxRowsPurged)],
  },
  {
    id: 'reaper',
    title: 'reaper',
    leftLabel: 'rows',
    left: [sum(MetricNames.StaleLeasesReleased), sum(MetricNames.RowsPurged), sum(MetricNames.PayloadsPurged)],
  },
];

/** The functions' row: one series per function. */
export const FUNCTION_WIDGETS: readonly FunctionWidget[] = [
  { title: 'Lambda errors', metric: 'Errors', stat: 'Sum' },
  { title: 'Lambda throttles', metric: 'Throttles', stat: 'Sum' },
  { title: 'Lambda duration p99 (ms)', metric: 'Duration', stat: 'p99' },
  // The workers fanned out, and how far: at most each worker's reserved concurrency.
  { title: 'Lambda concurrent executions', metric: 'ConcurrentExecutions', stat: 'Maximum' },
];

/** What decides which widgets and series a consumer's row shows. */
export interface ChartedConsumer {
  schemaRegistry?: boolean;
  emits?: boolean;
}

/** The widgets of one consumer's row. */
export function widgetsOf(consumer: ChartedConsumer): ConsumerWidget[] {
  return CONSUMER_WIDGETS.filter((w) => !w.whenEmits || consumer.emits === true);
}

/** A widget side's series as charted for one consumer (does it declare a schema registry?). */
export function seriesOf(series: readonly Series[], consumer: ChartedConsumer): Series[] {
  return series.filter((s) => isInboxSeries(s) || !s.withSchemaRegistry || consumer.schemaRegistry === true);
}

export function isInboxSeries(series: Series): series is InboxSeries {
  return 'metric' in series;
}

export function seriesLabel(series: Series): string {
  return isInboxSeries(series) ? (series.label ?? series.metric) : series.label;
}
