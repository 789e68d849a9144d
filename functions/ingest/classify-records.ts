/**
 * A batch's records sorted into what the store writes: inbox rows, poison rows, and the
 * partitions handed back to the mapping because a record of theirs cannot be read now.
 * Decoding itself is decode.ts; this is what the ingest does with each record's verdict.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { InboxInsert } from '../inbox/insert-batch';
import type { PoisonInsert } from '../inbox/record-poison';
import { undecodedPoison, type Decoded } from './decode';
import { PoisonCodes } from './poison-codes';
import type { BatchItemFailure, KafkaRecord } from './types';

export interface Classified {
  /** Every valid record, a repeated event id included. */
  valid: InboxInsert[];
  /** One row per event id: the lowest offset (the first delivery of it). */
  unique: InboxInsert[];
  poison: PoisonInsert[];
  /** Each partition handed back, from the first record the registry could not be asked about. */
  handedBack: BatchItemFailure[];
  /** Records handed back (those records and every later one of their partition). */
  registryUnavailable: number;
  /** The first registry error, for the log line. */
  unavailableReason: string | undefined;
}

type Verdict = { valid: InboxInsert } | { poison: PoisonInsert };

/** A partition's records up to the first that must be handed back; `from` is that record's offset. */
interface PartitionVerdicts {
  verdicts: Verdict[];
  handedBack?: { from: number; records: number; reason: string };
}

/**
 * Decode every record of `partitions` with `decode`. A partition whose record cannot be
 * read now (registry unavailable) is handed back from that record on: the mapping
 * redelivers it and everything after it, in order.
 */
export function classifyRecords(
  partitions: ReadonlyArray<readonly [string, readonly KafkaRecord[]]>,
  decode: (record: KafkaRecord) => Decoded,
  logger: Pick<Logger, 'error'>,
): Classified {
  const out: Classified = { valid: [], unique: [], poison: [], handedBack: [], registryUnavailable: 0, unavailableReason: undefined };
  for (const [partition, records] of partitions) {
    const { verdicts, handedBack } = classifyPartition(records, decode, logger);
    if (handedBack !== undefined) {
      out.handedBack.push({ itemIdentifier: { partition, offset: handedBack.from } });
      out.registryUnavailable += handedBack.records;
      out.unavailableReason ??= handedBack.reason;
    }
    for (const item of verdicts) {
      const row = 'valid' in item ? item.valid : item.poison;
      if (handedBack !== undefined && row.offset >= handedBack.from) continue;
      if ('valid' in item) out.valid.push(item.valid);
      else out.poison.push(item.poison);
    }
  }
  out.unique = dedupe(out.valid);
  return out;
}

function classifyPartition(
  records: readonly KafkaRecord[],
  decode: (record: KafkaRecord) => Decoded,
  logger: Pick<Logger, 'error'>,
): PartitionVerdicts {
  const verdicts: Verdict[] = [];
  for (const record of records) {
    try {
      const d = decode(record);
      if (d.kind === 'unavailable') {
        const from = Math.min(...records.filter((r) => r.offset >= record.offset).map((r) => r.offset));
        return { verdicts, handedBack: { from, records: records.filter((r) => r.offset >= from).length, reason: d.reason } };
      }
      verdicts.push(d.kind === 'valid' ? { valid: d.row } : { poison: d.row });
    } catch (error) {
      // A defect in decoding must not block the partition: keep the record as delivered.
      // Not the error's message: a library's may quote the value.
      logger.error('record decoding threw', {
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        error: (error as Error)?.name ?? 'unknown',
      });
      verdicts.push({
        poison: undecodedPoison(record, PoisonCodes.INGEST_FAILED, 'decoding the record failed unexpectedly; see the ingest log'),
      });
    }
  }
  return { verdicts };
}

/** Keep one row per event id: the lowest offset (the first delivery of it). */
function dedupe(rows: InboxInsert[]): InboxInsert[] {
  const byId = new Map<string, InboxInsert>();
  for (const row of rows) {
    const seen = byId.get(row.eventId);
    if (seen === undefined || row.offset < seen.offset) byId.set(row.eventId, row);
  }
  return [...byId.values()];
}
