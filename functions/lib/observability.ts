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
import { METRIC_DIMENSION, type MetricName } from './metric-names';

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

/** Add a count metric (skips nothing: zero is a data point dashboards rely on). */
export function count(metrics: Metrics, name: MetricName, value: number): void {
  metrics.addMetric(name, MetricUnit.Count, value);
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
