/**
 * Logger and Metrics for the functions during a local run.
 *
 * The functions receive real Powertools instances, so they log and count exactly as in
 * Lambda. Two things differ, both by subclassing rather than by touching the environment:
 * log lines go to a file (the terminal belongs to the progress display), and metrics are
 * tallied in memory instead of being printed as EMF, so the summary can show what each
 * function itself reported.
 */
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import { Logger } from '@aws-lambda-powertools/logger';
import type { ConstructorOptions } from '@aws-lambda-powertools/logger/types';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { MetricResolution, MetricUnit } from '@aws-lambda-powertools/metrics/types';
import { METRIC_DIMENSION } from '../../functions/lib/metric-names';

/** Where log lines go: one JSON document per line. */
export interface LogSink {
  write(line: string): void;
  close(): Promise<void>;
}

export function fileSink(path: string): LogSink {
  mkdirSync(dirname(path), { recursive: true });
  const stream: WriteStream = createWriteStream(path, { flags: 'w' });
  return {
    write: (line) => void stream.write(`${line}\n`),
    close: () => new Promise((resolve) => stream.end(() => resolve())),
  };
}

export const nullSink: LogSink = { write: () => {}, close: async () => {} };

/** A Powertools Logger whose lines (and its children's) go to a sink instead of stdout. */
export class SinkLogger extends Logger {
  constructor(
    private readonly sink: LogSink,
    options: ConstructorOptions = {},
  ) {
    super(options);
  }

  protected override createLogger(options?: ConstructorOptions): Logger {
    return new SinkLogger(this.sink, options);
  }

  protected override printLog(_level: number, log: Parameters<Logger['printLog']>[1]): void {
    this.sink.write(JSON.stringify(log.getAttributes(), this.getJsonReplacer()));
  }
}

/** Per consumer (the ConsumerName dimension), per metric name, the sum of what was added. */
export type MetricTally = Map<string, Map<string, number>>;

export function tallyOf(tally: MetricTally, consumer: string, name: string): number {
  return tally.get(consumer)?.get(name) ?? 0;
}

/**
 * A Powertools Metrics that adds every metric into a tally under its ConsumerName
 * dimension (the default one, or one added per flush as the reaper does), and whose flush
 * only clears instead of printing EMF.
 */
export class TallyMetrics extends Metrics {
  #dimension: string | undefined;

  constructor(
    private readonly tally: MetricTally,
    private readonly consumerName?: string,
  ) {
    super({ namespace: 'KafkaInboxLocal', serviceName: 'kafka-inbox-local' });
  }

  override addDimension(name: string, value: string): this {
    if (name === METRIC_DIMENSION) this.#dimension = value;
    return super.addDimension(name, value);
  }

  override addMetric(name: string, unit: MetricUnit, value: number, resolution?: MetricResolution): this {
    const consumer = this.#dimension ?? this.consumerName ?? '(none)';
    let byName = this.tally.get(consumer);
    if (byName === undefined) this.tally.set(consumer, (byName = new Map()));
    byName.set(name, (byName.get(name) ?? 0) + value);
    return super.addMetric(name, unit, value, resolution);
  }

  override publishStoredMetrics(): this {
    this.clearMetrics();
    this.clearDimensions();
    this.#dimension = undefined;
    return this;
  }
}
