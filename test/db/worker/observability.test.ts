/**
 * The worker's log lines and metrics: one INFO line per batch with its counts, a line per row
 * that did not succeed (WARN, ERROR) and per row that did at DEBUG only (identifiers, as the
 * case inbox design lists them); never a payload.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { describe, expect, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { ErrorCodes } from '../../../functions/lib/errors';
import { MetricNames } from '../../../functions/lib/metric-names';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { work } from './support';
import { workerRoleOf } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const sql = db.sql;
/** The code under test connects as the worker function does. */
const asWorker = db.as(workerRoleOf(caseProjection));

/** Records what the worker hands to its logger and metrics. */
function recorders() {
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const metrics: { name: string; unit: string; value: number }[] = [];
  const logAt =
    (level: string) =>
    (message: string, fields: Record<string, unknown> = {}) =>
      void lines.push({ level, message, fields });
  const logger = { info: logAt('info'), warn: logAt('warn'), error: logAt('error'), debug: logAt('debug') } as unknown as Logger;
  const metricsRecorder = {
    addMetric: (name: string, unit: string, value: number) => void metrics.push({ name, unit, value }),
  } as unknown as Metrics;
  return { lines, metrics, logger, metricsRecorder };
}

describe('worker observability', () => {
  it('logs a batch in one INFO line with its counts, each row at DEBUG or, when it failed, at ERROR, with identifiers only', async () => {
    const secret = 'SECRET-PAYLOAD-VALUE';
    const [good, bad] = await insertInboxRows(sql, [
      {
        payload: { caseId: 'case_obs', acceptedAt: '2026-07-03T09:15:30Z', note: secret },
        correlationId: 'corr_obs',
        topic: 'regulatory.case.events.v1',
        partition: 3,
        offset: 120932,
        receivedSecondsAgo: 2,
      },
      { payload: { caseId: 7, note: secret }, receivedSecondsAgo: 1 },
    ]);
    const r = recorders();

    await work(asWorker, caseProjection, { logger: r.logger, metrics: r.metricsRecorder });

    const rows = r.lines.filter((l) => l.message === 'consumer_inbox_processed');
    expect(rows).toHaveLength(2);
    const byEvent = (id: string) => rows.find((l) => l.fields.eventId === id);
    expect(byEvent(good!.event_id)).toEqual({
      level: 'debug',
      message: 'consumer_inbox_processed',
      fields: {
        event: 'consumer_inbox_processed',
        consumerName: 'case-projection',
        eventId: good!.event_id,
        eventType: 'regulatory.case.accepted.v1',
        aggregateId: 'case_obs',
        topic: 'regulatory.case.events.v1',
        partition: 3,
        offset: 120932,
        correlationId: 'corr_obs',
        attemptCount: 1,
        durationMs: expect.any(Number),
        outcome: 'PROCESSED',
      },
    });
    expect(byEvent(bad!.event_id)).toMatchObject({
      level: 'error',
      fields: { eventId: bad!.event_id, outcome: 'QUARANTINED', errorCode: ErrorCodes.PAYLOAD_INVALID },
    });
    expect(JSON.stringify(r.lines)).not.toContain(secret);
    // At INFO: the batch, once.
    expect(r.lines.filter((l) => l.level === 'info')).toEqual([
      {
        level: 'info',
        message: 'worker_batch',
        fields: {
          consumerName: 'case-projection',
          claimed: 2,
          processed: 1,
          retried: 0,
          quarantined: 1,
          ignored: 0,
          released: 0,
          lost: 0,
          durationMs: expect.any(Number),
        },
      },
    ]);

    // Added per batch and once more at the end: CloudWatch sums the values of a metric. The
    // counts of what went wrong or was skipped only when not zero (PUBLISHED_WHEN_NOT_ZERO).
    const counts: Record<string, number> = {};
    for (const m of r.metrics.filter((x) => x.unit === 'Count')) counts[m.name] = (counts[m.name] ?? 0) + m.value;
    expect(counts).toEqual({
      [MetricNames.EventsProcessed]: 1,
      [MetricNames.EventsQuarantined]: 1,
    });
    const latency = r.metrics.filter((m) => m.name === MetricNames.ProcessingLatency);
    expect(latency).toHaveLength(1);
    // Received two seconds ago by the database's clock.
    expect(latency[0]!.value).toBeGreaterThanOrEqual(2_000);
  });
});
