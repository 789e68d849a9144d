/**
 * The Logger and Metrics instances. Log lines are structured JSON; no payload, header
 * value or credential is ever passed to the logger — only identifiers and counts.
 *
 * No log level is passed to the Logger: one given to its constructor would override
 * POWERTOOLS_LOG_LEVEL and LOG_LEVEL, so the Logger reads them itself, after Lambda's
 * AWS_LAMBDA_LOG_LEVEL, as Powertools documents (config.ts validates them).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Config } from './config';
import { classifyError } from './errors';
import { METRIC_DIMENSION, PUBLISHED_WHEN_NOT_ZERO, type MetricName } from './metric-names';

export { MetricUnit };

/**
 * What a function that publishes gauges per consumer (the reaper, the relay) needs of
 * Powertools' Metrics, which satisfies it; tests pass a recorder.
 */
export interface GaugePublisher {
  addDimension(name: string, value: string): unknown;
  addMetric(name: string, unit: (typeof MetricUnit)[keyof typeof MetricUnit], value: number): unknown;
  publishStoredMetrics(): unknown;
}

export interface Observability {
  logger: Logger;
  metrics: Metrics;
}

export function createObservability(config: Config, component: string): Observability {
  const logger = new Logger({
    serviceName: config.observability.serviceName,
    persistentKeys: { component, ...(config.consumerName ? { consumerName: config.consumerName } : {}) },
  });
  const metrics = new Metrics({
    namespace: config.observability.metricsNamespace,
    serviceName: config.observability.serviceName,
    ...(config.consumerName ? { defaultDimensions: { [METRIC_DIMENSION]: config.consumerName } } : {}),
  });
  return { logger, metrics };
}

/**
 * Add a metric's value, unless it is zero and the metric is published only when it is not
 * (PUBLISHED_WHEN_NOT_ZERO). Resolves whether it was added.
 */
export function measure(
  metrics: Pick<GaugePublisher, 'addMetric'>,
  name: MetricName,
  unit: (typeof MetricUnit)[keyof typeof MetricUnit],
  value: number,
): boolean {
  if (value === 0 && PUBLISHED_WHEN_NOT_ZERO.has(name)) return false;
  metrics.addMetric(name, unit, value);
  return true;
}

/** Add a count metric (measure's rule: zero is published where dashboards and alarms read it). */
export function count(metrics: Pick<GaugePublisher, 'addMetric'>, name: MetricName, value: number): void {
  measure(metrics, name, MetricUnit.Count, value);
}

/**
 * The warning of a function whose work ran a second time on a new connection (db.ts,
 * retryOnDeadConnection): a connection died while the container was frozen, or a failover.
 */
export function connectionRetried(logger: Pick<Logger, 'warn'>): (error: unknown) => void {
  return (error) => logger.warn('database_connection_retried', { errorCode: classifyError(error).code, reason: codeOf(error) });
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
