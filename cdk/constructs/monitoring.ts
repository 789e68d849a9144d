/**
 * What the dashboard and the alarms both chart: the functions' own metrics (named only
 * through functions/lib/metric-names.ts, so nothing charted can lack an emitter) and the
 * AWS metrics of the functions, the event-source mappings and the cluster.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { METRIC_DIMENSION, MetricNames, type MetricName } from '../../functions/lib/metric-names';
import { DASHBOARD_PERIOD_MINUTES } from './dashboard-widgets';

export const PERIOD = Duration.minutes(DASHBOARD_PERIOD_MINUTES);

export interface MonitoredConsumer {
  name: string;
  ingest: lambda.IFunction;
  worker: lambda.IFunction;
  eventSourceMappingIds: string[];
  /** Its mappings validate records against a schema registry. */
  schemaRegistry: boolean;
  /** It emits events through the outbox (the relay publishes them). */
  emits: boolean;
}

export interface MonitoredFunction {
  label: string;
  function: lambda.IFunction;
}

export class InboxMetrics {
  readonly period = PERIOD;

  constructor(
    private readonly namespace: string,
    /** Powertools adds a `service` dimension to every metric: it is part of the metric's identity. */
    private readonly serviceName: string,
  ) {}

  /** One of our metrics for one consumer. */
  metric(consumer: string, name: MetricName, statistic: string, label?: string): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: this.namespace,
      metricName: name,
      dimensionsMap: { [METRIC_DIMENSION]: consumer, service: this.serviceName },
      statistic,
      period: PERIOD,
      label: label ?? name,
    });
  }

  /**
   * A SEARCH expression over every consumer's series of one of our metrics (the dimensions
   * ConsumerName and service, this service only): what the overview charts without naming
   * a consumer. The label of each series is its consumer.
   */
  searchAllConsumers(name: MetricName, statistic: string): string {
    const schema = `{${this.namespace},${METRIC_DIMENSION},service}`;
    return `SEARCH('${schema} MetricName="${name}" service="${this.serviceName}"', '${statistic}', ${PERIOD.toSeconds()})`;
  }

  /**
   * A percentile of ProcessingLatency, or 0 for a period with fewer than `minSamples` rows
   * processed: in a quiet period one row that succeeded after its retries (minutes of
   * backoff) would be the whole "p99", and page someone for nothing.
   */
  latency(consumer: string, percentile: 'p50' | 'p99', minSamples: number): cloudwatch.MathExpression {
    return new cloudwatch.MathExpression({
      expression: `IF(samples >= ${minSamples}, latency, 0)`,
      usingMetrics: {
        latency: this.metric(consumer, MetricNames.ProcessingLatency, percentile),
        samples: this.metric(consumer, MetricNames.ProcessingLatency, 'SampleCount'),
      },
      period: PERIOD,
      label: `${consumer} latency ${percentile}`,
    });
  }

  /**
   * `value`, or 0 while the reaper reports the consumer paused (ops pause): a backlog that
   * grows because an operator paused it is no news. Both come from the reaper, in one
   * document a minute, so their data points line up.
   */
  unlessPaused(consumer: string, value: cloudwatch.IMetric, label: string): cloudwatch.MathExpression {
    return new cloudwatch.MathExpression({
      expression: 'IF(paused >= 1, 0, value)',
      usingMetrics: { value, paused: this.metric(consumer, MetricNames.ConsumerPaused, 'Maximum') },
      period: PERIOD,
      label: `${consumer} ${label} (0 while paused)`,
    });
  }

  /** AWS/Lambda OffsetLag of a consumer's ingest function: records in Kafka not yet processed. */
  offsetLag(consumer: MonitoredConsumer, label = 'offset lag'): cloudwatch.Metric {
    return consumer.ingest.metric('OffsetLag', { statistic: 'Maximum', period: PERIOD, label: `${consumer.name} ${label}` });
  }

  /**
   * Records that left the normal path: sent to the on-failure bucket or dropped by the
   * mappings (ESM metrics, dimension EventSourceMappingUUID), or that Lambda failed to
   * deliver to the bucket (function metric DestinationDeliveryFailures).
   */
  esmFailedRecords(consumer: MonitoredConsumer, label = 'records sent to on-failure or dropped'): cloudwatch.MathExpression {
    return this.sumOverMappings(
      consumer,
      { onfailure: 'OnFailureDestinationDeliveredEventCount', dropped: 'DroppedEventCount' },
      `${consumer.name} ${label}`,
      { delivery: consumer.ingest.metric('DestinationDeliveryFailures', { statistic: 'Sum', period: PERIOD }) },
    );
  }

  /**
   * Records the mappings could not validate or deserialize with the consumer's schema
   * registry (ESM metric SchemaRegistryErrorCount, ErrorCount group: emitted only when it
   * happens). Such records never reach the function, so no metric of ours can count them.
   */
  schemaRegistryErrors(consumer: MonitoredConsumer, label = 'schema registry errors'): cloudwatch.MathExpression {
    return this.sumOverMappings(consumer, { schemaregistry: 'SchemaRegistryErrorCount' }, `${consumer.name} ${label}`);
  }

  /**
   * Sum of AWS/Lambda ESM metrics (expression id → metric name) over every mapping of a
   * consumer (dimension EventSourceMappingUUID, ids suffixed with the mapping's index), gaps as 0.
   */
  private sumOverMappings(
    consumer: MonitoredConsumer,
    metricNames: Record<string, string>,
    label: string,
    extra: Record<string, cloudwatch.IMetric> = {},
  ): cloudwatch.MathExpression {
    const usingMetrics: Record<string, cloudwatch.IMetric> = { ...extra };
    consumer.eventSourceMappingIds.forEach((uuid, i) => {
      for (const [key, metricName] of Object.entries(metricNames)) {
        usingMetrics[`${key}${i}`] = new cloudwatch.Metric({
          namespace: 'AWS/Lambda',
          metricName,
          dimensionsMap: { EventSourceMappingUUID: uuid },
          statistic: 'Sum',
          period: PERIOD,
        });
      }
    });
    return new cloudwatch.MathExpression({
      expression: Object.keys(usingMetrics)
        .map((key) => `FILL(${key}, 0)`)
        .join(' + '),
      usingMetrics,
      period: PERIOD,
      label,
    });
  }
}
