/**
 * `reingest-failed --consumer C`: the batches a consumer's mappings gave up on, read back
 * from the on-failure bucket and handed to its ingest function again (../failed-batches.ts).
 *
 * Through the ingest function, as its own role and code: the inbox makes a record already
 * stored harmless (one row per event id), a poison record becomes a poison row, an inline
 * consumer processes as it ingests. A dry run (the default) lists what it would hand over;
 * `--apply` does it, stopping at the first batch the function does not store (the database
 * failing again), so a later run resumes there with `--after`. Both are audited.
 */
import { z } from 'zod';
import { listPauses } from '../../inbox/consumer-pause';
import { recordOperatorAction } from '../queries/operator-audit';
import { caller, count, datetime, flag, reasonText, since, text } from '../args';
import { actorOf, defineCommand, knownConsumer, type OpsDeps } from '../command';
import { readConsumerEntry } from '../consumer-directory';
import { OpsError, OpsErrorCodes } from '../errors';
import { ingestAgain, listStoredBatches, readStoredBatch, type BatchContents, type IngestOutcome } from '../failed-batches';
import { fields, table } from '../format';

export interface ReingestedBatch {
  key: string;
  lastModified: Date;
  /** Why the mapping gave up on it (requestContext.condition), when the object says. */
  condition: string | null;
  records: number;
  /** Each topic-partition's first and last offset in the batch. */
  partitions: Record<string, { first: number; last: number }>;
  /** Dry run: 'would-ingest'; applied: what the ingest function made of it; 'unusable': see problem. */
  outcome: 'would-ingest' | IngestOutcome['outcome'] | 'unusable' | 'not-reached';
  problem?: string;
}

export interface ReingestFailedResult {
  dryRun: boolean;
  consumer: string;
  bucket: string;
  from: Date;
  to: Date;
  batches: ReingestedBatch[];
  /** Records handed to the ingest function and stored (a dry run: that it would hand over). */
  records: number;
  /** Applied: a batch the ingest function did not store stopped the run (the batches after it: not-reached). */
  stopped: boolean;
  /** The last key handled, when batches remain after it: repeat with --after it (null: from the first). */
  next: string | null;
  auditId: string;
}

const DEFAULT_SINCE = { seconds: 7 * 86_400 };

/** The bucket, the consumer's mappings and its ingest function, or what is missing. */
async function whereFrom(deps: OpsDeps, consumer: string): Promise<{ bucket: string; mappings: string[]; ingestFunction: string }> {
  const bucket = deps.config.failedRecordsBucket;
  if (bucket === undefined || deps.s3 === undefined) {
    throw new OpsError(OpsErrorCodes.NOT_CONFIGURED, 'no on-failure bucket is configured (FAILED_RECORDS_BUCKET)');
  }
  if (deps.config.consumerDirectory === undefined || deps.ssm === undefined) {
    throw new OpsError(OpsErrorCodes.NOT_CONFIGURED, 'no consumer directory is configured (CONSUMER_DIRECTORY)');
  }
  const entry = await readConsumerEntry(deps.ssm, deps.config.consumerDirectory, consumer);
  if (entry.ingestFunction === undefined) {
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `the directory entry of "${consumer}" names no ingest function: its consumer stack predates reingest-failed; deploy it first`,
    );
  }
  return { bucket, mappings: entry.ingestMappings, ingestFunction: entry.ingestFunction };
}

function described(key: string, lastModified: Date, contents: BatchContents): ReingestedBatch {
  return contents.kind === 'batch'
    ? {
        key,
        lastModified,
        condition: contents.condition,
        records: contents.records,
        partitions: contents.partitions,
        outcome: 'would-ingest',
      }
    : { key, lastModified, condition: contents.condition, records: 0, partitions: {}, outcome: 'unusable', problem: contents.problem };
}

export const reingestFailed = defineCommand({
  usage: `reingest-failed --consumer C [--since 7d|ISO] [--until ISO] [--after KEY] [--limit N] [--apply --reason TEXT] [--actor NAME]
      the batches its mappings gave up on (the on-failure bucket), handed to its ingest function again; a dry run unless --apply`,
  schema: z.strictObject({
    ...caller,
    consumer: text,
    since: since.optional(),
    until: datetime.optional(),
    after: text.optional(),
    limit: count(20, 200),
    apply: flag,
    reason: reasonText.optional(),
  }),

  changes: 'apply-flag',
  async run(deps, args, inv): Promise<ReingestFailedResult> {
    const consumer = knownConsumer(deps, args.consumer).name;
    const dryRun = !args.apply;
    const actor = dryRun ? (args.actor ?? inv.defaultActor ?? null) : actorOf(args, inv);
    if (!dryRun && args.reason === undefined) {
      throw new OpsError(OpsErrorCodes.REASON_REQUIRED, 'reingest-failed --apply stores records for good: say why with reason');
    }
    if (!dryRun && (await listPauses(deps.sql, [consumer])).some((p) => p.target === 'ingest')) {
      throw new OpsError(OpsErrorCodes.INGEST_PAUSED, `the ingest of "${consumer}" is paused: resume it (ops resume --ingest) first`);
    }
    const { bucket, mappings, ingestFunction } = await whereFrom(deps, consumer);
    const now = deps.now?.() ?? new Date();
    const start = args.since ?? DEFAULT_SINCE;
    const from = 'at' in start ? new Date(start.at) : new Date(now.getTime() - start.seconds * 1000);
    const to = args.until === undefined ? now : new Date(args.until);
    const listed = await listStoredBatches(deps.s3!, { bucket, mappings, from, to, after: args.after, limit: args.limit });

    const batches: ReingestedBatch[] = [];
    let stopped = false;
    let lastDone = args.after;
    for (const { key, lastModified } of listed.batches) {
      if (stopped) {
        batches.push({ key, lastModified, condition: null, records: 0, partitions: {}, outcome: 'not-reached' });
        continue;
      }
      const contents = await readStoredBatch(deps.s3!, bucket, key);
      const batch = described(key, lastModified, contents);
      if (!dryRun && contents.kind === 'batch') {
        const result = await ingestAgain(deps.lambda, ingestFunction, contents.event);
        batch.outcome = result.outcome;
        if (result.outcome === 'failed') batch.problem = result.error;
        if (result.outcome === 'handed-back') batch.problem = `${result.batchItemFailures.length} partitions reported back`;
        stopped = result.outcome !== 'stored';
      }
      batches.push(batch);
      if (!stopped) lastDone = key;
    }
    const next = stopped || listed.more ? (lastDone ?? null) : null;
    const records = batches.filter((b) => b.outcome === (dryRun ? 'would-ingest' : 'stored')).reduce((n, b) => n + b.records, 0);
    const audit = await recordOperatorAction(deps.sql, {
      action: 'reingest-failed',
      actor,
      reason: args.reason ?? null,
      source: inv.source,
      requestId: inv.requestId ?? null,
      dryRun,
      consumerNames: [consumer],
      request: { from: from.toISOString(), to: to.toISOString(), after: args.after ?? null, limit: args.limit },
      affectedCount: records,
      outcome: {
        bucket,
        next,
        stopped,
        batches: batches.map(({ key, outcome, records: n, problem }) => ({ key, outcome, records: n, problem })),
      },
    });
    deps.logger?.info('ops_reingest_failed', { consumer, dryRun, batches: batches.length, records, stopped, actor });
    return { dryRun, consumer, bucket, from, to, batches, records, stopped, next, auditId: audit.audit_id };
  },

  format: (r) =>
    [
      fields([
        ['consumer', r.consumer],
        ['bucket', r.bucket],
        ['modified', `${r.from.toISOString()} .. ${r.to.toISOString()}`],
        [r.dryRun ? 'records to ingest' : 'records stored', r.records],
      ]),
      table(r.batches, [
        ['object', (b) => b.key],
        ['condition', (b) => b.condition],
        ['records', (b) => b.records],
        [
          'offsets',
          (b) =>
            Object.entries(b.partitions)
              .map(([p, o]) => `${p}:${o.first}-${o.last}`)
              .join(' '),
        ],
        ['outcome', (b) => (b.problem === undefined ? b.outcome : `${b.outcome}: ${b.problem}`)],
      ]),
      r.dryRun ? 'dry run: nothing was ingested; repeat with --apply --reason TEXT' : '',
      r.stopped ? 'stopped: the ingest function did not store a batch (outcome above); run again once the cause is fixed' : '',
      r.next !== null ? `more: repeat with --after ${r.next}` : '',
    ]
      .filter((l) => l !== '')
      .join('\n'),
});
