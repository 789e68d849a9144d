/**
 * The on-failure bucket as reingest-failed reads it: the objects an ingest mapping wrote
 * there, what each holds, and handing a held batch to the consumer's ingest function again.
 *
 * For an S3 destination, Lambda writes one object per batch it gave up on, under
 * `aws/lambda/<mapping UUID>/…`: a JSON invocation record (requestContext.condition says why)
 * whose `payload` is the original MSK event as an escaped JSON string (AWS Lambda developer
 * guide, "Capturing discarded batches for an Amazon MSK event source"). A batch over the
 * destination's size limit is recorded without its payload (MaximumPayloadSizeExceeded):
 * its topic, partitions and offsets are there, its records are not; they are read again
 * from Kafka, not from here.
 */
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { z } from 'zod';
import type { KafkaBatchResponse, KafkaEvent } from '../ingest/types';

/** Where Lambda writes every mapping's failed batches (the ingest roles may write here only: cdk/constructs/kafka-ingest.ts). */
export const FAILED_BATCH_PREFIX = 'aws/lambda/';

/** The prefix under which a mapping's failed batches are written. */
export function mappingPrefix(mappingUuid: string): string {
  return `${FAILED_BATCH_PREFIX}${mappingUuid}/`;
}

export interface StoredBatch {
  key: string;
  lastModified: Date;
}

/**
 * The objects under the mappings' prefixes modified in [from, to), in key order (mappings by
 * UUID), after `after` (the last key of a previous page), at most `limit`; `more` when
 * others remain.
 */
export async function listStoredBatches(
  s3: Pick<S3Client, 'send'>,
  q: { bucket: string; mappings: readonly string[]; from: Date; to: Date; after?: string | undefined; limit: number },
): Promise<{ batches: StoredBatch[]; more: boolean }> {
  const batches: StoredBatch[] = [];
  for (const prefix of [...q.mappings].sort().map(mappingPrefix)) {
    // A page that ended inside an earlier prefix skips this one's start; one that ended past it skips it all.
    if (q.after !== undefined && q.after >= prefix && !q.after.startsWith(prefix)) continue;
    let token: string | undefined;
    do {
      const page = await s3.send(
        new ListObjectsV2Command({
          Bucket: q.bucket,
          Prefix: prefix,
          ...(q.after?.startsWith(prefix) === true ? { StartAfter: q.after } : {}),
          ...(token === undefined ? {} : { ContinuationToken: token }),
        }),
      );
      for (const o of page.Contents ?? []) {
        if (o.Key === undefined || o.LastModified === undefined) continue;
        if (o.LastModified < q.from || o.LastModified >= q.to) continue;
        if (batches.length === q.limit) return { batches, more: true };
        batches.push({ key: o.Key, lastModified: o.LastModified });
      }
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
    } while (token !== undefined);
  }
  return { batches, more: false };
}

const kafkaRecord = z.object({ topic: z.string(), partition: z.number().int(), offset: z.number().int() }).passthrough();
const kafkaEvent = z.object({ records: z.record(z.string(), z.array(kafkaRecord)) }).passthrough();
const invocationRecord = z.object({
  requestContext: z.object({ condition: z.string() }).passthrough(),
  payload: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
});

/** What one object holds: the batch to ingest again, or why it cannot be. */
export type BatchContents =
  | { kind: 'batch'; condition: string; event: KafkaEvent; records: number; partitions: Record<string, { first: number; last: number }> }
  | { kind: 'unusable'; condition: string | null; problem: string };

/** An object's invocation record, read and checked; never throws for what the object holds. */
export async function readStoredBatch(s3: Pick<S3Client, 'send'>, bucket: string, key: string): Promise<BatchContents> {
  const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  const text = (await out.Body?.transformToString('utf-8')) ?? '';
  return contentsOf(text);
}

export function contentsOf(text: string): BatchContents {
  const record = invocationRecord.safeParse(parseJson(text));
  if (!record.success) return { kind: 'unusable', condition: null, problem: 'not a Lambda invocation record (JSON with requestContext)' };
  const { condition } = record.data.requestContext;
  const payload = record.data.payload;
  if (payload === undefined) return { kind: 'unusable', condition, problem: 'no payload: read its offsets again from Kafka' };
  const event = kafkaEvent.safeParse(typeof payload === 'string' ? parseJson(payload) : payload);
  if (!event.success) return { kind: 'unusable', condition, problem: 'its payload is not a Kafka event (records by topic-partition)' };
  const partitions: Record<string, { first: number; last: number }> = {};
  let records = 0;
  for (const [partition, list] of Object.entries(event.data.records)) {
    if (list.length === 0) continue;
    records += list.length;
    const offsets = list.map((r) => r.offset);
    partitions[partition] = { first: Math.min(...offsets), last: Math.max(...offsets) };
  }
  return { kind: 'batch', condition, event: event.data as KafkaEvent, records, partitions };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** What the ingest function made of a batch handed to it again. */
export type IngestOutcome =
  | { outcome: 'stored' }
  /** It reported records back (the database failed again): they stay in the bucket, to try later. */
  | { outcome: 'handed-back'; batchItemFailures: KafkaBatchResponse['batchItemFailures'] }
  | { outcome: 'failed'; error: string };

/** Invoke the consumer's ingest function with the batch, synchronously, as its mapping would. */
export async function ingestAgain(lambda: Pick<LambdaClient, 'send'>, functionName: string, event: KafkaEvent): Promise<IngestOutcome> {
  const out = await lambda.send(
    new InvokeCommand({ FunctionName: functionName, InvocationType: 'RequestResponse', Payload: Buffer.from(JSON.stringify(event)) }),
  );
  const body = parseJson(Buffer.from(out.Payload ?? new Uint8Array()).toString('utf8'));
  if (out.FunctionError !== undefined) {
    const type = typeof body === 'object' && body !== null ? (body as { errorType?: unknown }).errorType : undefined;
    return { outcome: 'failed', error: `${out.FunctionError}${typeof type === 'string' ? `: ${type}` : ''}` };
  }
  const failures = (body as Partial<KafkaBatchResponse> | undefined)?.batchItemFailures;
  if (!Array.isArray(failures)) return { outcome: 'failed', error: 'the ingest function answered without batchItemFailures' };
  return failures.length === 0 ? { outcome: 'stored' } : { outcome: 'handed-back', batchItemFailures: failures };
}
