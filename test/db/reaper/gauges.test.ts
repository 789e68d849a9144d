import { describe, expect, it } from 'vitest';
import { CONSUMERS } from '../../../functions/consumers/index';
import { readGauges } from '../../../functions/inbox/gauges';
import { MetricNames } from '../../../functions/lib/metric-names';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, insertPoisonRow } from '../../helpers/factories';
import { MetricsRecorder, reap } from './support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();

describe('reaper: gauges', () => {
  it('match the table, per consumer, and are published with the ConsumerName dimension', async () => {
    await insertInboxRows(db.sql, [
      { status: 'RECEIVED', receivedSecondsAgo: 600 },
      { status: 'RECEIVED', receivedSecondsAgo: 30 },
      { status: 'RETRY_PENDING', receivedSecondsAgo: 900, nextAttemptInSeconds: 60 }, // not due yet
      { status: 'RETRY_PENDING', receivedSecondsAgo: 120, nextAttemptInSeconds: -5 },
      { status: 'PROCESSING', receivedSecondsAgo: 3_000 },
      { status: 'PROCESSED', receivedSecondsAgo: 5_000 },
      { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' },
      { status: 'QUARANTINED', errorCode: 'MAX_ATTEMPTS_EXCEEDED' },
      { consumerName: 'case-sla', status: 'RECEIVED', receivedSecondsAgo: 10 },
      { consumerName: 'case-sla', status: 'IGNORED' },
    ]);
    await insertPoisonRow(db.sql, { createdSecondsAgo: 60 });
    await insertPoisonRow(db.sql, { createdSecondsAgo: 1_800 });
    await insertPoisonRow(db.sql, { createdSecondsAgo: 7_200 });
    await insertPoisonRow(db.sql, { consumerName: 'notification-service', topic: 'payment.completed' });
    const metrics = new MetricsRecorder();

    const result = await reap(db.as(DatabaseRoles.reaper), { metrics });

    // The oracle: the same figures by plain scans of the tables.
    const expected = await db.sql<
      { consumer_name: string; due_depth: number; oldest: number | null; quarantine_depth: number; poison_last_hour: number }[]
    >`
      select c.consumer_name,
             (select count(*)::int from integration.consumer_inbox i where i.consumer_name = c.consumer_name
                and i.status in ('RECEIVED', 'RETRY_PENDING') and coalesce(i.next_attempt_at, now()) <= now()) as due_depth,
             (select extract(epoch from now() - min(received_at))::float8 from integration.consumer_inbox i
               where i.consumer_name = c.consumer_name and i.status in ('RECEIVED', 'RETRY_PENDING')
                 and coalesce(i.next_attempt_at, now()) <= now()) as oldest,
             (select count(*)::int from integration.consumer_inbox i where i.consumer_name = c.consumer_name
                and i.status = 'QUARANTINED') as quarantine_depth,
             (select count(*)::int from integration.consumer_raw_poison p where p.consumer_name = c.consumer_name
                and p.created_at > now() - interval '1 hour') as poison_last_hour
      from (values ('case-projection'), ('case-sla'), ('notification-service')) as c(consumer_name)
      order by 1`;
    expect(expected.map((e) => [e.consumer_name, e.due_depth, e.quarantine_depth, e.poison_last_hour])).toEqual([
      ['case-projection', 3, 2, 2],
      ['case-sla', 1, 0, 0],
      ['notification-service', 0, 0, 1],
    ]);
    for (const e of expected) {
      const report = result.consumers.find((c) => c.consumerName === e.consumer_name)!;
      expect(report.gauges).toMatchObject({
        due_depth: e.due_depth,
        quarantine_depth: e.quarantine_depth,
        poison_last_hour: e.poison_last_hour,
      });
      // Both read now() in their own statements: equal up to the time between them.
      expect(report.gauges!.oldest_due_age_seconds).toBeGreaterThanOrEqual((e.oldest ?? 0) - 5);
      expect(report.gauges!.oldest_due_age_seconds).toBeLessThanOrEqual(e.oldest ?? 0);
      expect(metrics.value(e.consumer_name, MetricNames.DueDepth)).toBe(e.due_depth);
      expect(metrics.value(e.consumer_name, MetricNames.QuarantineDepth)).toBe(e.quarantine_depth);
      // A count of what went wrong is published when it is not zero (PUBLISHED_WHEN_NOT_ZERO).
      expect(metrics.value(e.consumer_name, MetricNames.PoisonLastHour)).toBe(e.poison_last_hour || undefined);
      expect(metrics.value(e.consumer_name, MetricNames.OldestDueAgeSeconds)).toBe(report.gauges!.oldest_due_age_seconds);
      expect(metrics.value(e.consumer_name, MetricNames.StaleLeasesReleased)).toBeUndefined();
      expect(metrics.value(e.consumer_name, MetricNames.RowsPurged)).toBeUndefined();
    }
    const projection = result.consumers.find((c) => c.consumerName === 'case-projection')!;
    expect(projection.gauges!.oldest_due_age_seconds).toBeGreaterThanOrEqual(600);
    // One flush per consumer, each carrying only its own dimension.
    expect(new Set(metrics.published.map((m) => JSON.stringify(m.dimensions)))).toEqual(
      new Set(CONSUMERS.map((c) => JSON.stringify({ ConsumerName: c.name }))),
    );
  });

  it('count released leases as due, since gauges are read after the release', async () => {
    await db.sql`delete from integration.consumer_inbox`;
    await insertInboxRows(db.sql, [{ consumerName: 'case-sla', status: 'PROCESSING', leaseExpiresInSeconds: -1 }]);
    const metrics = new MetricsRecorder();

    await reap(db.as(DatabaseRoles.reaper), { metrics });

    expect(metrics.value('case-sla', MetricNames.StaleLeasesReleased)).toBe(1);
    expect(metrics.value('case-sla', MetricNames.DueDepth)).toBe(1);
    expect(await readGauges(db.as(DatabaseRoles.reaper), [])).toEqual([]);
  });
});

describe('reaper: metrics when a step fails', () => {
  it('publishes the leases it released even when retention then fails', async () => {
    const failing = await useTestDatabase();
    await insertInboxRows(failing.sql, [{ consumerName: 'case-sla', status: 'PROCESSING', leaseExpiresInSeconds: -60 }]);
    await insertInboxRows(failing.sql, [{ consumerName: 'case-sla', status: 'PROCESSED' }]);
    await failing.sql`update integration.consumer_inbox set processed_at = now() - interval '40 days' where status = 'PROCESSED'`;
    // Retention's delete is refused by the database (a chosen data exception).
    await failing.sql.unsafe(`
      create function refuse_delete() returns trigger language plpgsql as $$
      begin raise exception 'retention refused' using errcode = '22023'; end $$;
      create trigger refuse_delete before delete on integration.consumer_inbox
      for each row execute function refuse_delete();`);
    const metrics = new MetricsRecorder();

    await expect(reap(failing.as(DatabaseRoles.reaper), { metrics })).rejects.toMatchObject({ code: '22023' });

    const [row] = await failing.sql`select status, error_code from integration.consumer_inbox where status <> 'PROCESSED'`;
    expect(row).toEqual({ status: 'RETRY_PENDING', error_code: 'STALE_PROCESSING_LOCK' });
    expect(metrics.value('case-sla', MetricNames.StaleLeasesReleased)).toBe(1);
  });
});
