/**
 * A paused consumer is not processed, however its worker was invoked: through the real
 * worker handler (functions/worker/handler.ts, configured from the environment as at cold
 * start) for each invocation source, with the Lambda API mocked (aws-sdk-client-mock: every
 * LambdaClient, the handler's own included); the pause and the resume through the ops
 * commands an operator runs.
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetScheduleCommand, SchedulerClient, UpdateScheduleCommand } from '@aws-sdk/client-scheduler';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { getConsumer, localManifest } from '../../../functions/consumers';
import { DatabaseRoles, workerRoleOf } from '../../../functions/lib/database-roles';
import { loadConfig } from '../../../functions/lib/config';
import { getSql } from '../../../functions/lib/db';
import type { OpsDeps } from '../../../functions/ops/command';
import { runCommand } from '../../../functions/ops/run';
import { workerLambda } from '../../../functions/worker/handler';
import { createWorkerInvocation } from '../../../functions/wings/wake-ups/invocation';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { directoryEntry, directoryOf, DIRECTORY } from '../ops/support';
import { invocationsOf, quietObservability, variant } from './support';

const db = await useTestDatabase();
const CONSUMER = 'case-projection';
const WORKER_FUNCTION = 'inbox-worker-case-projection-fn';
const lambdaMock = mockClient(LambdaClient);
const schedulerMock = mockClient(SchedulerClient);

// The one place this file sets the environment: the handler module reads it at import, as at cold start.
process.env.DATABASE_URL = db.urlAs(workerRoleOf({ name: 'case-projection' }));
process.env.CONSUMER_NAME = CONSUMER;
process.env.LOG_LEVEL = 'SILENT';
process.env.AWS_LAMBDA_FUNCTION_NAME = WORKER_FUNCTION;
process.env.AWS_REGION = 'eu-west-1';
process.env.WORKER_IDLE_MS = '0';
const handler = await workerLambda(getConsumer(CONSUMER));
afterAll(async () => {
  await (await getSql(loadConfig().database)).end({ timeout: 5 });
});

const ops: OpsDeps = {
  sql: db.as(DatabaseRoles.ops),
  scheduler: new SchedulerClient({ region: 'eu-west-1' }),
  lambda: new LambdaClient({ region: 'eu-west-1' }),
  consumers: localManifest(),
  ssm: directoryOf({
    [CONSUMER]: directoryEntry(CONSUMER, { workerSchedule: 'inbox-worker-case-projection', workerFunction: WORKER_FUNCTION }),
  }),
  config: { scheduler: { groupName: 'inbox-schedules' }, consumerDirectory: DIRECTORY, maxPayloadBytes: 256 * 1024 },
};
const operator = { source: 'cli' as const, defaultActor: 'alice' };

const context = (awsRequestId: string, remaining = 60_000) => ({ awsRequestId, getRemainingTimeInMillis: () => remaining }) as never;

/** Five cases, each with three status changes in version order: fifteen rows, some of them retries already due. */
function statusChanges(): InboxRowSpec[] {
  return Array.from({ length: 5 }, (_, c) =>
    [1, 2, 3].map((version): InboxRowSpec => ({
      eventType: 'regulatory.case.status-changed.v1',
      aggregateId: `case_p${c}`,
      aggregateVersion: version,
      payload: { caseId: `case_p${c}`, newStatus: `STATUS_${version}` },
      ...(version === 1 && c === 0 ? { status: 'RETRY_PENDING' as const, attemptCount: 1, nextAttemptInSeconds: -5 } : {}),
    })),
  ).flat();
}

/** Everything a worker would change on a row. */
const rowStates = () =>
  db.sql`select inbox_id, status, attempt_count, next_attempt_at, locked_by, lease_expires_at, updated_at
         from integration.consumer_inbox order by inbox_id`;

async function pause(): Promise<void> {
  schedulerMock.on(GetScheduleCommand).resolves({
    Name: 'inbox-worker-case-projection',
    GroupName: 'inbox-schedules',
    ScheduleExpression: 'rate(1 minute)',
    State: 'ENABLED',
    Target: { Arn: 'arn:aws:lambda:eu-west-1:123456789012:function:x', RoleArn: 'arn:aws:iam::123456789012:role/x' },
    FlexibleTimeWindow: { Mode: 'OFF' },
  });
  schedulerMock.on(UpdateScheduleCommand).resolves({});
  await runCommand(ops, { command: 'pause', consumer: CONSUMER, reason: 'downstream outage' }, operator);
}

beforeEach(async () => {
  lambdaMock.reset();
  schedulerMock.reset();
  lambdaMock.on(InvokeCommand).resolves({ StatusCode: 202 });
  await db.sql`truncate integration.consumer_inbox, integration.consumer_worker_slot, integration.consumer_pause,
                        integration.operator_audit, read_model.case_summary, case_core.case_audit`;
});

describe('a paused consumer, through the worker handler', () => {
  /** Each way a worker is invoked, and the slot its invitation reserved (if any). */
  const sources = [
    { source: 'schedule', event: { source: 'schedule' } },
    { source: 'wake-up', event: { source: 'wake-up', consumerName: CONSUMER, slot: 1, invitation: 'wake-up:req-ingest' } },
    { source: 'fan-out', event: { source: 'fan-out', consumerName: CONSUMER, slot: 2, invitation: 'fan-out:worker:a:2' } },
    { source: 'hand-over', event: { source: 'hand-over', consumerName: CONSUMER, slot: 1, invitation: 'hand-over:worker:b' } },
    { source: 'resume', event: { source: 'resume' } },
    { source: 'by hand (an unknown event)', event: { anything: true } },
  ] as const;

  for (const { source, event } of sources) {
    it(`invoked by ${source}: claims nothing, spends no attempt, invokes nobody, frees its invitation`, async () => {
      await insertInboxRows(db.sql, statusChanges());
      await pause();
      if ('invitation' in event) {
        await db.sql`
          insert into integration.consumer_worker_slot (consumer_name, slot_no, held_by, held_until)
          values (${CONSUMER}, ${event.slot}, ${event.invitation}, now() + interval '10 seconds')`;
      }
      const before = await rowStates();

      const result = await handler(event, context(`req-${source}`));

      expect(result).toEqual({
        claimed: 0,
        processed: 0,
        retried: 0,
        quarantined: 0,
        ignored: 0,
        released: 0,
        lost: 0,
        stoppedBy: 'paused',
        slot: null,
        fannedOut: 0,
        handedOver: false,
      });
      expect(await rowStates()).toEqual(before);
      expect(invocationsOf(lambdaMock)).toEqual([]);
      expect(await db.sql`select count(*)::int as n from integration.consumer_worker_slot where held_by is not null`).toEqual([{ n: 0 }]);
      expect(await db.sql`select count(*)::int as n from read_model.case_summary`).toEqual([{ n: 0 }]);
    });
  }

  it('after resume, the worker it wakes processes every row exactly once, in aggregate order', async () => {
    await insertInboxRows(db.sql, statusChanges());
    await pause();
    await handler({ source: 'schedule' }, context('req-paused'));

    const resumed = await runCommand(ops, { command: 'resume', consumer: CONSUMER, reason: 'downstream back' }, operator);
    // ops resume woke the worker: that Invoke, delivered as Lambda would.
    const [wake] = invocationsOf(lambdaMock);
    expect(wake).toEqual({ FunctionName: WORKER_FUNCTION, InvocationType: 'Event', Payload: { source: 'resume' } });
    const result = await handler(wake!.Payload, context('req-resumed'));

    expect(resumed).toMatchObject({ paused: [], wakeUp: 'sent' });
    expect(result).toMatchObject({ claimed: 15, processed: 15, stoppedBy: 'idle' });
    const rows = await db.sql<{ status: string; attempt_count: number }[]>`select status, attempt_count from integration.consumer_inbox`;
    // Attempts: one each, the retry's earlier one included (the pause spent none).
    expect(rows.filter((r) => r.status === 'PROCESSED')).toHaveLength(15);
    expect(rows.map((r) => r.attempt_count).sort()).toEqual([...Array(14).fill(1), 2]);
    const applied = await db.sql<{ case_id: string; versions: number[] }[]>`
      select case_id, array_agg((after_value ->> 'aggregateVersion')::int order by audit_id) as versions
      from case_core.case_audit group by case_id order by case_id`;
    expect(applied).toEqual(Array.from({ length: 5 }, (_, c) => ({ case_id: `case_p${c}`, versions: [1, 2, 3] })));
  });
});

describe('a pause that lands while a worker drains', () => {
  it('stops it at its next claim: the batch in flight finishes, nothing more is claimed, no fan-out or hand-over', async () => {
    await insertInboxRows(db.sql, statusChanges());
    const base = getConsumer(CONSUMER);
    let paused = false;
    // The operator pauses while the first batch is being processed.
    const pausing = variant(base, {
      handlers: {
        'regulatory.case.status-changed.v1': {
          // One event at a time (no handleBatch), so the pause lands inside the batch.
          1: {
            payload: base.handlers['regulatory.case.status-changed.v1']![1]!.payload,
            async handle(tx, event, handlerContext) {
              if (!paused) {
                paused = true;
                await pause();
              }
              return base.handlers['regulatory.case.status-changed.v1']![1]!.handle(tx, event, handlerContext);
            },
          },
        },
      },
    });
    let remaining = 60_000;
    const invoke = createWorkerInvocation({
      sql: db.as(workerRoleOf({ name: 'case-projection' })),
      consumer: pausing,
      // One lane per claim, a claim that fills its batch (fan-out would be weighed), and a
      // budget that ends after it (a hand-over would follow).
      config: {
        worker: {
          batchSize: 3,
          runLength: 3,
          safetyMarginMs: 1_000,
          leaseSeconds: 300,
          idleMs: 0,
          pollMs: 20,
          maxConcurrency: 4,
          fanOutDrainSeconds: 1,
        },
        wakeUps: { enabled: true },
      },
      ...quietObservability(),
      self: { lambda: new LambdaClient({ region: 'eu-west-1' }), functionName: WORKER_FUNCTION },
      random: () => 0,
    });

    const result = await invoke(
      { source: 'schedule' },
      { awsRequestId: 'req-draining', getRemainingTimeInMillis: () => (remaining -= 5_000) },
    );

    expect(result).toMatchObject({ stoppedBy: 'paused', claimed: 3, processed: 3, fannedOut: 0, handedOver: false });
    expect(invocationsOf(lambdaMock)).toEqual([]);
    const [counts] = await db.sql<{ processed: number; open: number; in_flight: number }[]>`
      select count(*) filter (where status = 'PROCESSED')::int as processed,
             count(*) filter (where status in ('RECEIVED', 'RETRY_PENDING'))::int as open,
             count(*) filter (where status = 'PROCESSING')::int as in_flight
      from integration.consumer_inbox`;
    expect(counts).toEqual({ processed: 3, open: 12, in_flight: 0 });
  });
});
