/**
 * The local run's metrics over time, shaped as the dashboard's widgets: for each consumer
 * and each widget of cdk/constructs/dashboard-widgets.ts, one series per metric, computed
 * over fixed buckets from the EMF documents the functions flushed (observability.ts) —
 * the statistic CloudWatch would compute over its 5-minute period, over a few seconds.
 *
 * Sums are shown per second (a bucket's sum divided by its length), with 0 where nothing
 * was emitted: an ingest function that was not invoked received nothing. Gauges and
 * percentiles have no value where nothing was emitted (a gap, as CloudWatch draws it).
 */
import { isInboxSeries, seriesLabel, seriesOf, widgetsOf, type Series, type Stat } from '../../cdk/constructs/dashboard-widgets';
import { findConsumer } from '../../functions/consumers';
import { emitsEvents } from '../../functions/framework/types';
import type { MetricLog } from './observability';

export type FaultKind = 'database-unreachable' | 'commit-lost' | 'worker-crash';

export const FAULT_LABELS: Record<FaultKind, string> = {
  'database-unreachable': 'ingest with the database unreachable',
  'commit-lost': 'offset commit lost (redelivery)',
  'worker-crash': 'worker crashed',
};

/** A fault the run injected, when and where. */
export interface FaultEvent {
  /** Epoch milliseconds. */
  time: number;
  kind: FaultKind;
  consumer: string;
}

export interface TimelineSeries {
  label: string;
  stat: Stat;
  axis: 'left' | 'right';
  /** One value per bucket; null where the statistic has no value. */
  values: (number | null)[];
  /** Whether any function emitted this metric for this consumer during the run. */
  hasData: boolean;
}

export interface TimelineWidget {
  id: string;
  consumer: string;
  title: string;
  leftLabel?: string;
  rightLabel?: string;
  series: TimelineSeries[];
  /** Series of the dashboard widget that only AWS publishes: not drawn locally. */
  awsOnly: string[];
}

export interface TimelineFaults {
  kind: FaultKind;
  consumer: string;
  /** Bucket start, seconds since the run started. */
  second: number;
  count: number;
}

export interface Timeline {
  bucketSeconds: number;
  /** Bucket starts, seconds since the run started. */
  seconds: number[];
  widgets: TimelineWidget[];
  faults: TimelineFaults[];
}

export interface TimelineInput {
  log: MetricLog;
  faults: readonly FaultEvent[];
  consumers: readonly string[];
  /** Epoch milliseconds. */
  startedAt: number;
  endedAt: number;
}

/** About 120 buckets over the run, of a whole number of seconds (1 s for runs up to two minutes). */
export function bucketSecondsFor(durationMs: number): number {
  return Math.max(1, Math.ceil(durationMs / 1000 / 120));
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function statistic(stat: Stat, values: number[], bucketSeconds: number): number | null {
  if (stat === 'Sum') return values.reduce((a, b) => a + b, 0) / bucketSeconds;
  if (values.length === 0) return null;
  if (stat === 'Maximum') return Math.max(...values);
  if (stat === 'Average') return values.reduce((a, b) => a + b, 0) / values.length;
  return percentile(
    [...values].sort((a, b) => a - b),
    Number(stat.slice(1)),
  );
}

export function buildTimeline(input: TimelineInput): Timeline {
  const bucketSeconds = bucketSecondsFor(input.endedAt - input.startedAt);
  const buckets = Math.max(1, Math.ceil((input.endedAt - input.startedAt) / 1000 / bucketSeconds));
  const bucketOf = (time: number) => Math.min(buckets - 1, Math.max(0, Math.floor((time - input.startedAt) / 1000 / bucketSeconds)));

  // consumer → metric → per bucket, the values emitted in it
  const values = new Map<string, Map<string, number[][]>>();
  for (const p of input.log.points()) {
    let byName = values.get(p.consumer);
    if (byName === undefined) values.set(p.consumer, (byName = new Map()));
    let perBucket = byName.get(p.name);
    if (perBucket === undefined) byName.set(p.name, (perBucket = Array.from({ length: buckets }, () => [])));
    perBucket[bucketOf(p.time)]!.push(p.value);
  }

  const widgets: TimelineWidget[] = [];
  for (const consumer of input.consumers) {
    const declaration = findConsumer(consumer);
    for (const w of widgetsOf({ emits: declaration !== undefined && emitsEvents(declaration) })) {
      const series: TimelineSeries[] = [];
      const awsOnly: string[] = [];
      const add = (list: readonly Series[] | undefined, axis: 'left' | 'right') => {
        for (const s of list ?? []) {
          if (!isInboxSeries(s)) {
            awsOnly.push(seriesLabel(s));
            continue;
          }
          const perBucket = values.get(consumer)?.get(s.metric);
          series.push({
            label: seriesLabel(s),
            stat: s.stat,
            axis,
            values: Array.from({ length: buckets }, (_, i) => (perBucket ? statistic(s.stat, perBucket[i]!, bucketSeconds) : null)),
            hasData: perBucket !== undefined,
          });
        }
      };
      // The local run's consumers are the shipped declarations: none declares a schema registry.
      add(seriesOf(w.left, {}), 'left');
      add(w.right && seriesOf(w.right, {}), 'right');
      widgets.push({
        id: w.id,
        consumer,
        title: w.title,
        ...(w.leftLabel ? { leftLabel: w.leftLabel } : {}),
        ...(w.rightLabel ? { rightLabel: w.rightLabel } : {}),
        series,
        awsOnly,
      });
    }
  }

  const faultCounts = new Map<string, TimelineFaults>();
  for (const f of input.faults) {
    const second = bucketOf(f.time) * bucketSeconds;
    const key = `${f.consumer}|${f.kind}|${second}`;
    const seen = faultCounts.get(key);
    if (seen) seen.count += 1;
    else faultCounts.set(key, { kind: f.kind, consumer: f.consumer, second, count: 1 });
  }

  return {
    bucketSeconds,
    seconds: Array.from({ length: buckets }, (_, i) => i * bucketSeconds),
    widgets,
    faults: [...faultCounts.values()],
  };
}
