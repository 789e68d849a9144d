/**
 * Logger and Metrics for the functions during a local run.
 *
 * The functions receive real Powertools instances, so they log and count exactly as in
 * Lambda. Two things differ, both by subclassing rather than by touching the environment:
 * log lines go to a file (the terminal belongs to the progress display), and the EMF
 * documents a flush would print are kept in memory instead, so that the summary and the
 * report show what each function itself reported.
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

/** One EMF document, as Powertools serializes it and CloudWatch reads it from the log. */
export type EmfDocument = ReturnType<Metrics['serializeMetrics']>;

/** One value of one metric, as the report reads it. */
export interface MetricPoint {
  /** Epoch milliseconds (the document's timestamp). */
  time: number;
  consumer: string;
  name: string;
  value: number;
}

/** Every EMF document the functions flushed during the run, in order. */
export class MetricLog {
  readonly documents: EmfDocument[] = [];

  record(document: EmfDocument): void {
    this.documents.push(document);
  }

  *points(): Generator<MetricPoint> {
    for (const doc of this.documents) {
      const consumer = typeof doc[METRIC_DIMENSION] === 'string' ? (doc[METRIC_DIMENSION] as string) : '(none)';
      for (const directive of doc._aws.CloudWatchMetrics) {
        for (const { Name } of directive.Metrics) {
          const raw = doc[Name];
          for (const value of Array.isArray(raw) ? raw : [raw]) {
            if (typeof value === 'number') yield { time: doc._aws.Timestamp, consumer, name: Name, value };
          }
        }
      }
    }
  }

  /** Every value of a metric the consumer's functions emitted, in order. */
  values(consumer: string, name: string): number[] {
    const values: number[] = [];
    for (const p of this.points()) if (p.consumer === consumer && p.name === name) values.push(p.value);
    return values;
  }

  /** The sum of every value of a metric the consumer's functions emitted. */
  total(consumer: string, name: string): number {
    return this.values(consumer, name).reduce((a, b) => a + b, 0);
  }
}

/**
 * A Powertools Metrics whose flush records the EMF document it serializes instead of
 * printing it. The consumer is the ConsumerName default dimension, as in Lambda, or the one
 * the reaper adds per flush.
 *
 * Lambda flushes once per invocation (the handlers do). The local run calls the functions'
 * logic directly and flushes after each invocation the same way, but a worker invocation
 * may drain for many seconds: so a flush also happens when the oldest stored value is
 * `flushEveryMs` old, and the report's one-second buckets show when things happened.
 */
export class CapturingMetrics extends Metrics {
  #firstStoredAt: number | undefined;

  constructor(
    private readonly log: MetricLog,
    consumerName?: string,
    private readonly flushEveryMs = 250,
  ) {
    super({
      namespace: 'KafkaInboxLocal',
      serviceName: 'kafka-inbox-local',
      ...(consumerName ? { defaultDimensions: { [METRIC_DIMENSION]: consumerName } } : {}),
    });
  }

  override addMetric(name: string, unit: MetricUnit, value: number, resolution?: MetricResolution): this {
    const now = Date.now();
    if (this.#firstStoredAt !== undefined && now - this.#firstStoredAt >= this.flushEveryMs) this.publishStoredMetrics();
    this.#firstStoredAt ??= now;
    return super.addMetric(name, unit, value, resolution);
  }

  override publishStoredMetrics(): this {
    try {
      if (this.hasStoredMetrics()) this.log.record(this.serializeMetrics());
    } finally {
      this.clearMetrics();
      this.clearDimensions();
      this.clearMetadata();
      this.#firstStoredAt = undefined;
    }
    return this;
  }
}
