/**
 * ops reingest-failed: the on-failure bucket's batches of a consumer, read with the exact S3
 * calls (aws-sdk-client-mock) and handed to its ingest function (the Invoke answered by the
 * real ingest, as the consumer's own role, on this database).
 */
import { randomUUID } from 'node:crypto';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import type { OpsDeps } from '../../../functions/ops/command';
import type { KafkaEvent } from '../../../functions/ingest/types';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { pauseConsumer } from '../../helpers/factories';
import { ingestFor, PAYMENT_TOPIC, paymentCompleted } from '../ingest/support';
import { auditRows, opsDeps, opsError, run, schedulerConfig } from './support';

const db = await useTestDatabase();
const s3 = new S3Client({ region: 'eu-west-1' });
const ssm = new SSMClient({ region: 'eu-west-1' });
const lambda = new LambdaClient({ region: 'eu-west-1' });
const s3Mock = mockClient(s3);
const ssmMock = mockClient(ssm);
const lambdaMock = mockClient(lambda);

const BUCKET = 'inbox-failed-records';
const MAPPING = '5e1f0c2a-7b3d-4c8e-9f10-aaaaaaaaaaaa';
const INGEST_FUNCTION = 'inbox-notification-service-ingest';
const NOW = new Date('2026-12-06T12:00:00Z');

const deps: OpsDeps = opsDeps(db.sql, {
  s3,
  ssm,
  lambda,
  now: () => NOW,
  config: { ...schedulerConfig(), failedRecordsBucket: BUCKET },
});

/** An on-failure object as Lambda writes it for an S3 destination: the event as an escaped JSON string. */
function invocationRecord(event: KafkaEvent | undefined, condition = 'RetryAttemptsExhausted'): string {
  return JSON.stringify({
    requestContext: {
      requestId: randomUUID(),
      functionArn: `arn:aws:lambda:eu-west-1:123456789012:function:${INGEST_FUNCTION}`,
      condition,
      approximateInvokeCount: 101,
    },
    responseContext: event === undefined ? null : { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
    version: '1.0',
    timestamp: '2026-12-05T03:00:00.000Z',
    KafkaBatchInfo: {
      batchSize: 3,
      eventSourceArn: 'arn:aws:kafka:eu-west-1:123456789012:cluster/payments/x',
      bootstrapServers: 'b-1:9098',
      payloadSize: 900,
    },
    ...(event === undefined ? {} : { payload: JSON.stringify(event) }),
  });
}

/** An Invoke response's Payload: the function's answer as JSON bytes. */
const payloadOf = (answer: unknown) => Buffer.from(JSON.stringify(answer)) as never;

/** What GetObject's Body offers that the command reads. */
function body(text: string) {
  return { transformToString: async () => text };
}

const payment = (offset: number, eventId: string) =>
  mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset, key: `payment-${offset}`, value: paymentCompleted(eventId) });

const keyAt = (stamp: string) =>
  `aws/lambda/${MAPPING}/${PAYMENT_TOPIC}-0/${stamp.slice(0, 10).replaceAll('-', '/')}/${stamp}-${randomUUID()}`;

beforeEach(async () => {
  s3Mock.reset();
  ssmMock.reset();
  lambdaMock.reset();
  await db.sql`truncate integration.consumer_inbox, integration.consumer_raw_poison, integration.operator_audit, integration.consumer_pause, public.notification_jobs`;
  ssmMock.on(GetParameterCommand).resolves({
    Parameter: {
      Value: JSON.stringify({
        workerSchedule: 'worker-notification-service',
        workerFunction: 'w',
        ingestMappings: [MAPPING],
        ingestFunction: INGEST_FUNCTION,
      }),
    },
  });
  // The ingest function, as its mapping would invoke it: the real ingest as the consumer's own role.
  const ingest = ingestFor(db, 'notification-service');
  lambdaMock.on(InvokeCommand).callsFake(async (input: { Payload: Uint8Array }) => {
    const report = await ingest(JSON.parse(Buffer.from(input.Payload).toString('utf8')) as KafkaEvent);
    return { StatusCode: 200, Payload: payloadOf(report.response) };
  });
});

/** The bucket: a batch partly stored already, a batch too large to have kept its payload, and one older than the window. */
async function arrangeBucket() {
  const [e1, e2, e3] = [randomUUID(), randomUUID(), randomUUID()];
  // e1 made it into the inbox before the database failed; e2 and e3 did not.
  await ingestFor(db, 'notification-service')(mskEvent([payment(7, e1)]));
  const partlyStored = mskEvent([payment(7, e1), payment(8, e2), payment(9, e3)]);
  const objects = {
    partlyStored: { key: keyAt('2026-12-05T03.00.00'), modified: new Date('2026-12-05T03:00:01Z'), text: invocationRecord(partlyStored) },
    tooLarge: {
      key: keyAt('2026-12-05T04.00.00'),
      modified: new Date('2026-12-05T04:00:01Z'),
      text: invocationRecord(undefined, 'MaximumPayloadSizeExceeded'),
    },
    tooOld: {
      key: keyAt('2026-11-01T00.00.00'),
      modified: new Date('2026-11-01T00:00:01Z'),
      text: invocationRecord(mskEvent([payment(1, randomUUID())])),
    },
  };
  // Keys sort by date: the old one comes first in the listing.
  s3Mock.on(ListObjectsV2Command).resolves({
    IsTruncated: false,
    Contents: [objects.tooOld, objects.partlyStored, objects.tooLarge].map((o) => ({ Key: o.key, LastModified: o.modified })),
  });
  for (const o of Object.values(objects))
    s3Mock.on(GetObjectCommand, { Bucket: BUCKET, Key: o.key }).resolves({ Body: body(o.text) as never });
  return { objects, eventIds: [e1, e2, e3] };
}

describe('reingest-failed', () => {
  it('a dry run lists what it would hand over, reads with the exact S3 calls, invokes nothing and changes no row', async () => {
    const { objects } = await arrangeBucket();

    const result = await run(deps, { command: 'reingest-failed', consumer: 'notification-service' });

    expect(result).toMatchObject({
      dryRun: true,
      consumer: 'notification-service',
      bucket: BUCKET,
      from: new Date('2026-11-29T12:00:00Z'),
      to: NOW,
      records: 3,
      stopped: false,
      next: null,
      batches: [
        {
          key: objects.partlyStored.key,
          condition: 'RetryAttemptsExhausted',
          records: 3,
          partitions: { 'payment.completed-0': { first: 7, last: 9 } },
          outcome: 'would-ingest',
        },
        {
          key: objects.tooLarge.key,
          condition: 'MaximumPayloadSizeExceeded',
          records: 0,
          outcome: 'unusable',
          problem: 'no payload: read its offsets again from Kafka',
        },
      ],
    });
    expect(ssmMock.commandCalls(GetParameterCommand).map((c) => c.args[0].input)).toEqual([
      { Name: '/kafka-inbox/test/consumers/notification-service' },
    ]);
    expect(s3Mock.commandCalls(ListObjectsV2Command).map((c) => c.args[0].input)).toEqual([
      { Bucket: BUCKET, Prefix: `aws/lambda/${MAPPING}/` },
    ]);
    expect(s3Mock.commandCalls(GetObjectCommand).map((c) => c.args[0].input)).toEqual([
      { Bucket: BUCKET, Key: objects.partlyStored.key },
      { Bucket: BUCKET, Key: objects.tooLarge.key },
    ]);
    expect(lambdaMock.commandCalls(InvokeCommand)).toHaveLength(0);
    expect(await db.sql`select count(*)::int as n from integration.consumer_inbox`).toEqual([{ n: 1 }]);
    expect(await auditRows(db.sql)).toMatchObject([
      { action: 'reingest-failed', dry_run: true, actor: 'alice', affected_count: 3, consumer_names: ['notification-service'] },
    ]);
  });

  it('--apply hands the batch to the ingest function: the stored record stays one row, the others are stored and processed once', async () => {
    const { objects, eventIds } = await arrangeBucket();

    const result = await run(deps, {
      command: 'reingest-failed',
      consumer: 'notification-service',
      apply: true,
      reason: 'database outage of 2026-12-05',
    });

    expect(result).toMatchObject({ dryRun: false, records: 3, stopped: false, next: null });
    expect(result.batches.map((b: { outcome: string }) => b.outcome)).toEqual(['stored', 'unusable']);
    const invokes = lambdaMock.commandCalls(InvokeCommand).map((c) => c.args[0].input);
    expect(invokes).toHaveLength(1);
    expect(invokes[0]).toMatchObject({ FunctionName: INGEST_FUNCTION, InvocationType: 'RequestResponse' });
    expect(JSON.parse(Buffer.from(invokes[0]!.Payload as Uint8Array).toString('utf8'))).toEqual(
      JSON.parse(JSON.parse(objects.partlyStored.text).payload as string),
    );
    expect(await db.sql`select event_id, offset_no, status from integration.consumer_inbox order by offset_no`).toEqual(
      eventIds.map((id, i) => ({ event_id: id, offset_no: 7 + i, status: 'PROCESSED' })),
    );
    expect(await db.sql`select source_event_id from public.notification_jobs order by source_event_id`).toEqual(
      [...eventIds].sort().map((id) => ({ source_event_id: id })),
    );
    const [audit] = await auditRows(db.sql);
    expect(audit).toMatchObject({ action: 'reingest-failed', dry_run: false, reason: 'database outage of 2026-12-05', affected_count: 3 });
    expect(audit!.outcome).toMatchObject({
      bucket: BUCKET,
      batches: [{ key: objects.partlyStored.key, outcome: 'stored', records: 3 }, { outcome: 'unusable' }],
    });
  });

  it('stops at a batch the ingest function hands back, and says where to resume', async () => {
    const { objects } = await arrangeBucket();
    lambdaMock.on(InvokeCommand).resolves({
      StatusCode: 200,
      Payload: payloadOf({ batchItemFailures: [{ itemIdentifier: { partition: 'payment.completed-0', offset: 8 } }] }),
    });

    const result = await run(deps, {
      command: 'reingest-failed',
      consumer: 'notification-service',
      apply: true,
      reason: 'retry',
      since: '2026-12-05T00:00:00Z',
    });

    expect(result).toMatchObject({ stopped: true, next: null, records: 0 });
    expect(result.batches).toMatchObject([
      { key: objects.partlyStored.key, outcome: 'handed-back', problem: '1 partitions reported back' },
      { key: objects.tooLarge.key, outcome: 'not-reached' },
    ]);
    expect(s3Mock.commandCalls(GetObjectCommand)).toHaveLength(1);
  });

  it('pages by key: --limit, then --after the key it returned', async () => {
    const { objects } = await arrangeBucket();
    const first = await run(deps, { command: 'reingest-failed', consumer: 'notification-service', limit: 1 });
    expect(first).toMatchObject({ next: objects.partlyStored.key, batches: [{ key: objects.partlyStored.key }] });

    s3Mock.on(ListObjectsV2Command, { StartAfter: objects.partlyStored.key }).resolves({
      IsTruncated: false,
      Contents: [{ Key: objects.tooLarge.key, LastModified: objects.tooLarge.modified }],
    });
    const second = await run(deps, { command: 'reingest-failed', consumer: 'notification-service', limit: 1, after: first.next });
    expect(second).toMatchObject({ next: null, batches: [{ key: objects.tooLarge.key }] });
    expect(s3Mock.commandCalls(ListObjectsV2Command).at(-1)!.args[0].input).toEqual({
      Bucket: BUCKET,
      Prefix: `aws/lambda/${MAPPING}/`,
      StartAfter: objects.partlyStored.key,
    });
  });

  it('refuses --apply without a reason, and while the consumer’s ingest is paused', async () => {
    await arrangeBucket();
    await opsError(run(deps, { command: 'reingest-failed', consumer: 'notification-service', apply: true }), 'REASON_REQUIRED');
    await pauseConsumer(db.sql, 'notification-service', 'alice', 'ingest');
    await opsError(run(deps, { command: 'reingest-failed', consumer: 'notification-service', apply: true, reason: 'x' }), 'INGEST_PAUSED');
    expect(lambdaMock.commandCalls(InvokeCommand)).toHaveLength(0);
  });

  it('says what is missing when the consumer’s stack wrote no ingest function (a stack of the release before)', async () => {
    ssmMock.on(GetParameterCommand).resolves({
      Parameter: {
        Value: JSON.stringify({ workerSchedule: 'worker-notification-service', workerFunction: 'w', ingestMappings: [MAPPING] }),
      },
    });
    const error = await opsError(run(deps, { command: 'reingest-failed', consumer: 'notification-service' }), 'NOT_CONFIGURED');
    expect(error.message).toContain('its consumer stack predates reingest-failed; deploy it first');
  });
});
