/**
 * The ingest function wakes its consumer's worker (docs/worker.md, "Wake-ups"): after a
 * batch stored rows for the worker and only when no worker is awake, one asynchronous
 * Invoke of the worker function (aws-sdk-client-mock: the exact commands), gated so that a
 * burst of batches sends one; and a wake-up that fails changes nothing about the batch.
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { getConsumer } from '../../../functions/consumers';
import { notificationService } from '../../../functions/consumers/notification-service';
import { defineHandler, type ConsumerDeclaration } from '../../../functions/framework';
import { RetryableError } from '../../../functions/lib/errors';
import { createIngest } from '../../../functions/ingest/ingest';
import { wakeUpsTo } from '../../../functions/wings/wake-ups/wake-worker';
import type { KafkaEvent } from '../../../functions/ingest/types';
import { MetricNames } from '../../../functions/lib/metric-names';
import { mskEvent, mskRecord, spreadRecords } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { pauseConsumer } from '../../helpers/factories';
import { invocationsOf, withTrigger } from '../worker/support';
import { caseAccepted, CASE_TOPIC, inboxRows, ingestRole, PAYMENT_TOPIC, paymentCompleted, truncateAll } from './support';

const db = await useTestDatabase();
const lambda = new LambdaClient({ region: 'eu-west-1' });
const lambdaMock = mockClient(lambda);
const WORKER = 'KafkaInbox-dev-stateless-CaseProjectionWorkerFunction-AbC123';

beforeEach(async () => {
  lambdaMock.reset();
  lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });
  await truncateAll(db.sql);
  await db.sql`truncate integration.consumer_worker_slot, integration.consumer_pause, integration.operator_audit`;
});

let requests = 0;

/** An ingest with a wake-up target, as the handler builds it; its metrics readable afterwards. */
function ingestWithWakeUp(consumerName: string | ConsumerDeclaration = 'case-projection') {
  const metrics = new Metrics({ namespace: 'IngestTest', serviceName: 'ingest-test' });
  const ingest = createIngest({
    sql: db.as(ingestRole(consumerName)),
    consumer: typeof consumerName === 'string' ? getConsumer(consumerName) : consumerName,
    config: { maxPayloadBytes: 256 * 1024 },
    logger: new Logger({ serviceName: 'ingest-test', logLevel: 'SILENT' }),
    metrics,
    wakeUp: wakeUpsTo({ lambda, functionName: WORKER }),
  });
  return {
    ingest: (event: KafkaEvent, requestId = `req-${++requests}`) => ingest(event, { awsRequestId: requestId }),
    /** The values of one metric stored since the ingest was made. */
    metric: (name: string) => (metrics.serializeMetrics() as unknown as Record<string, unknown>)[name],
  };
}

const invocations = () => invocationsOf(lambdaMock);

const slots = () =>
  db.sql<{ consumer_name: string; slot_no: number; held_by: string | null; held_for: boolean }[]>`
    select consumer_name, slot_no, held_by, held_until > now() as held_for
    from integration.consumer_worker_slot order by consumer_name, slot_no`;

const cases = (n: number) => mskEvent(spreadRecords({ topic: CASE_TOPIC, partitions: 2, count: n, value: () => caseAccepted() }));

describe('ingest wakes its worker', () => {
  it('after storing new rows with nobody awake: one asynchronous Invoke of the worker, with the slot it reserved', async () => {
    const { ingest, metric } = ingestWithWakeUp();

    const report = await ingest(cases(3), 'req-wake-1');

    expect(report).toMatchObject({ inserted: 3, wakeUp: 'sent', response: { batchItemFailures: [] } });
    expect(invocations()).toEqual([
      {
        FunctionName: WORKER,
        InvocationType: 'Event',
        Payload: { source: 'wake-up', consumerName: 'case-projection', slot: 1, invitation: 'wake-up:req-wake-1' },
      },
    ]);
    expect(await slots()).toEqual([{ consumer_name: 'case-projection', slot_no: 1, held_by: 'wake-up:req-wake-1', held_for: true }]);
    expect(metric(MetricNames.WakeUpsSent)).toBe(1);
  });

  it('sends nothing while a worker holds a slot (the gate is closed), and stores the batch', async () => {
    await db.sql`
      insert into integration.consumer_worker_slot (consumer_name, slot_no, held_by, held_until)
      values ('case-projection', 1, null, null), ('case-projection', 2, 'worker:req-awake:1', now() + interval '10 seconds')`;
    const { ingest } = ingestWithWakeUp();

    const report = await ingest(cases(2));

    expect(report).toMatchObject({ inserted: 2, wakeUp: 'gate-closed' });
    expect(invocations()).toEqual([]);
    expect((await inboxRows(db.sql)).map((r) => r.status)).toEqual(['RECEIVED', 'RECEIVED']);
    expect((await slots()).map((s) => s.held_by)).toEqual([null, 'worker:req-awake:1']);
  });

  it('wakes again once the worker has let its slot go (its hold lapsed)', async () => {
    await db.sql`
      insert into integration.consumer_worker_slot (consumer_name, slot_no, held_by, held_until)
      values ('case-projection', 1, 'worker:req-gone:1', now() - interval '1 second')`;
    const { ingest } = ingestWithWakeUp();

    const report = await ingest(cases(1), 'req-after-lapse');

    expect(report.wakeUp).toBe('sent');
    expect(invocations().map((i) => i.Payload)).toEqual([
      { source: 'wake-up', consumerName: 'case-projection', slot: 1, invitation: 'wake-up:req-after-lapse' },
    ]);
  });

  it('sends one wake-up for a burst of concurrent batches', async () => {
    const { ingest } = ingestWithWakeUp();
    const pollers = Array.from({ length: 6 }, () => db.client({ max: 2, role: ingestRole('case-projection') }));
    const burst = pollers.map((sql, i) =>
      createIngest({
        sql,
        consumer: getConsumer('case-projection'),
        config: { maxPayloadBytes: 256 * 1024 },
        logger: new Logger({ serviceName: 'ingest-test', logLevel: 'SILENT' }),
        metrics: new Metrics({ namespace: 'IngestTest', serviceName: 'ingest-test' }),
        wakeUp: wakeUpsTo({ lambda, functionName: WORKER }),
      })(cases(5), { awsRequestId: `req-burst-${i}` }),
    );

    const reports = await Promise.all([...burst, ingest(cases(5))]);

    expect(reports.map((r) => r.inserted)).toEqual([5, 5, 5, 5, 5, 5, 5]);
    expect(reports.filter((r) => r.wakeUp === 'sent')).toHaveLength(1);
    expect(reports.filter((r) => r.wakeUp === 'gate-closed')).toHaveLength(6);
    expect(invocations()).toHaveLength(1);
    await Promise.all(pollers.map((p) => p.end()));
  });

  it('sends nothing for a batch of duplicates only: nothing new for the worker', async () => {
    const event = cases(2);
    await ingestWithWakeUp().ingest(event);
    lambdaMock.resetHistory();
    await db.sql`update integration.consumer_worker_slot set held_by = null, held_until = null`;

    const again = await ingestWithWakeUp().ingest(event);

    expect(again).toMatchObject({ inserted: 0, duplicates: 2, wakeUp: null });
    expect(invocations()).toEqual([]);
  });

  it('stores the batch and answers as usual when the Invoke fails; the failure is counted, the reservation left to lapse', async () => {
    lambdaMock.on(InvokeCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException' }));
    const { ingest, metric } = ingestWithWakeUp();

    const report = await ingest(cases(3), 'req-fails');

    expect(report).toMatchObject({ inserted: 3, wakeUp: 'failed', response: { batchItemFailures: [] } });
    expect(invocations()).toHaveLength(1);
    expect(await inboxRows(db.sql)).toHaveLength(3);
    expect(metric(MetricNames.WakeUpFailures)).toBe(1);
    expect(metric(MetricNames.WakeUpsSent)).toBeUndefined();
    expect(await slots()).toEqual([{ consumer_name: 'case-projection', slot_no: 1, held_by: 'wake-up:req-fails', held_for: true }]);
  });

  it('stores the batch when the gate itself fails (the database refuses the reservation), and invokes nothing', async () => {
    const { ingest, metric } = ingestWithWakeUp();

    const report = await withTrigger(
      db.sql,
      {
        name: 'refuse_slot',
        on: 'integration.consumer_worker_slot',
        when: 'before insert or update',
        body: "raise exception 'slot refused' using errcode = '55P03';",
      },
      () => ingest(cases(2)),
    );

    expect(report).toMatchObject({ inserted: 2, wakeUp: 'failed', response: { batchItemFailures: [] } });
    expect(invocations()).toEqual([]);
    expect(await inboxRows(db.sql)).toHaveLength(2);
    expect(metric(MetricNames.WakeUpFailures)).toBe(1);
  });

  it('sends nothing when the batch is reported back (nothing was stored)', async () => {
    const { ingest } = ingestWithWakeUp();

    const report = await withTrigger(
      db.sql,
      {
        name: 'inbox_down',
        on: 'integration.consumer_inbox',
        when: 'before insert',
        body: "raise exception 'gone' using errcode = '57P01';",
      },
      () => ingest(cases(2)),
    );

    expect(report.response.batchItemFailures).not.toEqual([]);
    expect(report.wakeUp).toBeNull();
    expect(invocations()).toEqual([]);
  });
});

describe('an inline consumer wakes its worker', () => {
  it('only for rows its ingest transaction left to the worker (behind their aggregate)', async () => {
    const aggregate = 'pay_agg_1';
    const first = paymentCompleted(undefined, { aggregate_id: aggregate });
    const second = paymentCompleted(undefined, { aggregate_id: aggregate });
    const { ingest } = ingestWithWakeUp('notification-service');

    const processed = await ingest(mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 1, value: paymentCompleted() })]));
    const behind = await ingest(
      mskEvent([
        mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 2, value: first }),
        mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 3, value: second }),
      ]),
      'req-inline-behind',
    );

    expect(processed).toMatchObject({ inserted: 1, processed: 1, wakeUp: null });
    expect(behind).toMatchObject({ inserted: 2, processed: 1, wakeUp: 'sent' });
    expect(invocations().map((i) => i.Payload)).toEqual([
      { source: 'wake-up', consumerName: 'notification-service', slot: 1, invitation: 'wake-up:req-inline-behind' },
    ]);
  });

  it('for a row its handler left RETRY_PENDING: the woken worker is awake when the retry comes due', async () => {
    const flaky: ConsumerDeclaration = {
      ...notificationService,
      handlers: {
        'payment.completed': {
          1: defineHandler({
            payload: z.record(z.string(), z.unknown()),
            async handle() {
              throw new RetryableError('SMTP_DOWN', 'mail relay unavailable');
            },
          }),
        },
      },
    };
    const { ingest } = ingestWithWakeUp(flaky);

    const report = await ingest(
      mskEvent([mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset: 1, value: paymentCompleted() })]),
      'req-inline-retry',
    );

    expect(report).toMatchObject({ inserted: 1, processed: 0, retried: 1, wakeUp: 'sent' });
    expect(invocations().map((i) => i.Payload)).toEqual([
      { source: 'wake-up', consumerName: 'notification-service', slot: 1, invitation: 'wake-up:req-inline-retry' },
    ]);
  });
});

describe('a paused consumer (ops pause)', () => {
  const statesAndAttempts = () =>
    db.sql`select status, attempt_count, count(*)::int as n from integration.consumer_inbox group by 1, 2 order by 1, 2`;

  it('is ingested, but nobody is woken, also once an earlier invitation has lapsed', async () => {
    await pauseConsumer(db.sql, 'case-projection');
    await db.sql`
      insert into integration.consumer_worker_slot (consumer_name, slot_no, held_by, held_until)
      values ('case-projection', 1, 'wake-up:req-before-the-pause', now() - interval '1 second')`;
    const { ingest, metric } = ingestWithWakeUp();

    const report = await ingest(cases(3), 'req-paused');

    expect(report).toMatchObject({ inserted: 3, wakeUp: 'paused', response: { batchItemFailures: [] } });
    expect(invocations()).toEqual([]);
    expect(await slots()).toEqual([
      { consumer_name: 'case-projection', slot_no: 1, held_by: 'wake-up:req-before-the-pause', held_for: false },
    ]);
    expect(await statesAndAttempts()).toEqual([{ status: 'RECEIVED', attempt_count: 0, n: 3 }]);
    expect(metric(MetricNames.WakeUpsSent)).toBeUndefined();
  });

  it('an inline consumer stores its rows without processing them, wakes nobody, and they wait in order for the resume', async () => {
    await pauseConsumer(db.sql, 'notification-service');
    const { ingest } = ingestWithWakeUp('notification-service');
    const event = mskEvent(spreadRecords({ topic: PAYMENT_TOPIC, partitions: 1, count: 3, value: () => paymentCompleted() }));

    const report = await ingest(event, 'req-inline-paused');

    expect(report).toMatchObject({ inserted: 3, processed: 0, pausedInline: true, wakeUp: 'paused', response: { batchItemFailures: [] } });
    expect(invocations()).toEqual([]);
    expect(await statesAndAttempts()).toEqual([{ status: 'RECEIVED', attempt_count: 0, n: 3 }]);
    expect(await db.sql`select count(*)::int as n from public.notification_jobs`).toEqual([{ n: 0 }]);

    // Resumed: the next batch is processed inline again, and the worker takes the rows that waited.
    await db.sql`delete from integration.consumer_pause`;
    const next = await ingest(
      mskEvent(spreadRecords({ topic: PAYMENT_TOPIC, partitions: 1, count: 1, value: () => paymentCompleted(), firstOffset: 100 })),
    );
    expect(next).toMatchObject({ inserted: 1, processed: 1, pausedInline: false });
  });
});
