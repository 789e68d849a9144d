/** `poison reingest <id>`: re-parse a poison row with today's schemas; if valid, store it and resolve it. */
import { z } from 'zod';
import type { ConsumerManifestEntry } from '../../framework/manifest';
import { inboxIdOf } from '../queries/find-event';
import { insertInboxBatch, type InboxInsert } from '../../inbox/insert-batch';
import { recordOperatorAction } from '../queries/operator-audit';
import { getPoison, resolvePoison, type PoisonRow } from '../queries/poison';
import { binaryValueReader } from '../../wings/decoding/binary-values';
import { decodeRecord } from '../../ingest/decode';
import type { KafkaRecord } from '../../ingest/types';
import { caller, flag, poisonId, reasonText } from '../args';
import { actorOf, defineCommand, knownConsumer, type OpsDeps } from '../command';
import { OpsError, OpsErrorCodes } from '../errors';

/** The Kafka record a poison row was made from, as the event-source mapping delivered it. */
export function recordFromPoison(row: PoisonRow): KafkaRecord {
  const bytesOf = (text: string, encoding: 'utf8' | 'base64') =>
    encoding === 'base64' ? Buffer.from(text, 'base64') : Buffer.from(text, 'utf8');
  const headers: Array<Record<string, number[]>> = [];
  if (typeof row.headers === 'object' && row.headers !== null) {
    for (const [name, stored] of Object.entries(row.headers as Record<string, unknown>)) {
      for (const v of Array.isArray(stored) ? stored : [stored]) {
        const bytes =
          typeof v === 'string'
            ? Buffer.from(v, 'utf8')
            : typeof v === 'object' && v !== null && typeof (v as { base64?: unknown }).base64 === 'string'
              ? Buffer.from((v as { base64: string }).base64, 'base64')
              : Buffer.alloc(0);
        headers.push({ [name]: [...bytes] });
      }
    }
  }
  return {
    topic: row.topic_name,
    partition: row.partition_no,
    offset: row.offset_no,
    ...(row.record_timestamp !== null ? { timestamp: row.record_timestamp.getTime() } : {}),
    key: row.record_key === null ? null : bytesOf(row.record_key, row.record_key_encoding).toString('base64'),
    // INVALID_BASE64 rows keep what arrived, which was not base64: hand it back as it came.
    value:
      row.raw_value === null || row.raw_encoding === 'none'
        ? null
        : row.raw_encoding === 'base64'
          ? row.raw_value
          : Buffer.from(row.raw_value, 'utf8').toString('base64'),
    headers,
  };
}

type Event = { eventId: string; eventType: string; eventVersion: number };
type DryRun = { dryRun: true; valid: true; poisonId: string; consumer: string; auditId: string } & Event;
type Done = { dryRun: false; poisonId: string; consumer: string; inboxId: string; alreadyInInbox: boolean; auditId: string } & Event;

/**
 * An unresolved poison row decoded again with today's decoder: its consumer and the inbox
 * row it becomes. Resolved already, or still not valid: an OpsError that says why.
 */
function decodeAgain(deps: OpsDeps, row: PoisonRow): { consumer: ConsumerManifestEntry; decoded: { row: InboxInsert } } {
  if (row.resolved_at !== null) {
    throw new OpsError(
      OpsErrorCodes.ALREADY_RESOLVED,
      `poison row ${row.poison_id} was resolved by ${row.resolved_by ?? '?'} into inbox row ${row.resolved_inbox_id ?? '?'}`,
      { resolvedInboxId: row.resolved_inbox_id, resolvedBy: row.resolved_by, resolvedAt: row.resolved_at },
    );
  }
  const consumer = knownConsumer(deps, row.consumer_name);
  const decoded = decodeRecord(recordFromPoison(row), consumer, { maxPayloadBytes: deps.config.maxPayloadBytes }, binaryValueReader({}));
  if (decoded.kind === 'unavailable') {
    throw new OpsError(OpsErrorCodes.STILL_INVALID, `its writer schema cannot be read now: ${decoded.reason}`, {
      errorCode: 'SCHEMA_REGISTRY_UNAVAILABLE',
    });
  }
  if (decoded.kind === 'poison') {
    throw new OpsError(
      OpsErrorCodes.STILL_INVALID,
      `still invalid with today's schemas: ${decoded.row.errorCode}: ${decoded.row.errorMessage}`,
      { errorCode: decoded.row.errorCode, errorMessage: decoded.row.errorMessage },
    );
  }
  return { consumer, decoded };
}

/**
 * Re-parse a poison row with today's decoder and envelope schemas (the ingest function's
 * own, functions/ingest/decode.ts). Valid now: store it as an inbox row (idempotently: an
 * event id already in the inbox is linked, not duplicated) and mark the poison row
 * resolved, with the audit row, in one transaction. Still invalid: say why, change nothing.
 *
 * The row is stored RECEIVED, for the consumer's worker, whatever the consumer's mode: the
 * record's own ingest invocation is long gone, and the worker is the path every retry of
 * an inline consumer takes too.
 */
export const poisonReingest = defineCommand({
  usage: `poison reingest <poison-id> [--dry-run] [--reason TEXT] [--actor NAME]
      re-parse with today's schemas; if valid, store it in the inbox and mark the poison row resolved`,
  schema: z.strictObject({ ...caller, id: poisonId, reason: reasonText.optional(), dryRun: flag }),
  positional: 'id',

  changes: 'dry-run-flag',
  async run(deps, args, inv): Promise<DryRun | Done> {
    const actor = args.dryRun ? (args.actor ?? inv.defaultActor ?? null) : actorOf(args, inv);
    return deps.sql.begin(async (tx): Promise<DryRun | Done> => {
      const row = await getPoison(tx, args.id, !args.dryRun);
      if (row === undefined) throw new OpsError(OpsErrorCodes.NOT_FOUND, `no poison row ${args.id}`);
      const { consumer, decoded } = decodeAgain(deps, row);
      const event = { eventId: decoded.row.eventId, eventType: decoded.row.eventType, eventVersion: decoded.row.eventVersion };
      const trail = {
        action: 'reingest' as const,
        actor,
        reason: args.reason ?? null,
        source: inv.source,
        requestId: inv.requestId ?? null,
        consumerNames: [consumer.name],
        request: { poisonId: row.poison_id },
      };
      const offset = { topic: row.topic_name, partition: row.partition_no, offset: row.offset_no };
      if (args.dryRun) {
        // A dry run stores nothing, so it names no inbox row: affected 0, valid in the outcome.
        const audit = await recordOperatorAction(tx, {
          ...trail,
          dryRun: true,
          affectedCount: 0,
          outcome: { valid: true, ...offset, ...event },
        });
        return { dryRun: true, valid: true, poisonId: row.poison_id, consumer: consumer.name, auditId: audit.audit_id, ...event };
      }

      const [inserted] = await insertInboxBatch(tx, consumer.name, [decoded.row]);
      // Not inserted: the event id is already in the inbox (a later, valid redelivery of the
      // same event); the poison row is resolved by that row.
      const inboxId = inserted?.inbox_id ?? (await inboxIdOf(tx, consumer.name, decoded.row.eventId));
      if (inboxId === undefined) throw new Error('inbox row vanished between insert and lookup');
      const resolved = await resolvePoison(tx, { poisonId: row.poison_id, inboxId, resolvedBy: actorOf(args, inv) });
      if (resolved === undefined) throw new Error(`poison row ${row.poison_id} was resolved concurrently`);
      const audit = await recordOperatorAction(tx, {
        ...trail,
        dryRun: false,
        affectedCount: 1,
        inboxIds: [inboxId],
        outcome: { alreadyInInbox: inserted === undefined, ...offset, ...event },
      });
      deps.logger?.info('ops_poison_reingested', {
        poisonId: row.poison_id,
        consumer: consumer.name,
        inboxId,
        eventId: event.eventId,
        alreadyInInbox: inserted === undefined,
        actor,
      });
      return {
        dryRun: false,
        poisonId: row.poison_id,
        consumer: consumer.name,
        inboxId,
        alreadyInInbox: inserted === undefined,
        auditId: audit.audit_id,
        ...event,
      };
    });
  },

  format: (r) => {
    if (r.dryRun) return `valid with today's schemas: ${r.eventType}@${r.eventVersion} event ${r.eventId}; nothing changed`;
    return (
      `poison row ${r.poisonId} resolved: ` +
      (r.alreadyInInbox
        ? `event ${r.eventId} was already in the inbox as ${r.inboxId}`
        : `stored as inbox row ${r.inboxId} (RECEIVED) for ${r.consumer}`)
    );
  },
});
