/** What the reaper tests share: its dependencies, with a metrics recorder and a quiet logger. */
import { Logger } from '@aws-lambda-powertools/logger';
import type { Queryable } from '../../../functions/lib/db';
import { CONSUMERS } from '../../../functions/consumers/index';
import type { GaugePublisher } from '../../../functions/lib/observability';
import { runOnce, type ReaperDeps, type ReaperResult } from '../../../functions/reaper/reaper';

export interface RecordedMetric {
  dimensions: Record<string, string>;
  name: string;
  unit: string;
  value: number;
}

/** Records each published document's metrics with the dimensions they were flushed with. */
export class MetricsRecorder implements GaugePublisher {
  readonly published: RecordedMetric[] = [];
  #dimensions: Record<string, string> = {};
  #pending: Omit<RecordedMetric, 'dimensions'>[] = [];

  addDimension(name: string, value: string): void {
    this.#dimensions[name] = value;
  }
  addMetric(name: string, unit: string, value: number): void {
    this.#pending.push({ name, unit, value });
  }
  publishStoredMetrics(): void {
    for (const m of this.#pending) this.published.push({ dimensions: { ...this.#dimensions }, ...m });
    this.#pending = [];
    this.#dimensions = {};
  }
  /** The value of one metric published for one consumer. */
  value(consumerName: string, name: string): number | undefined {
    return this.published.find((m) => m.dimensions.ConsumerName === consumerName && m.name === name)?.value;
  }
}

export const quietLogger = new Logger({ serviceName: 'reaper-test', logLevel: 'SILENT' });

export function reaperDeps(sql: Queryable, overrides: Partial<ReaperDeps> = {}): ReaperDeps {
  return {
    sql,
    consumers: CONSUMERS,
    config: { reaper: { batchSize: 100, safetyMarginMs: 0 } },
    logger: quietLogger,
    metrics: new MetricsRecorder(),
    remainingMs: () => 60_000,
    ...overrides,
  };
}

export function reap(sql: Queryable, overrides: Partial<ReaperDeps> = {}): Promise<ReaperResult> {
  return runOnce(reaperDeps(sql, overrides));
}
