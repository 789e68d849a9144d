/** case-projection: keeps read_model.case_summary from the regulatory case events (seed 000). */
import { z } from 'zod';
import { AggregateVersionGapError, NonRetryableError } from '../lib/errors';
import { defineBatchHandler } from './dispatch';
import { defineHandler, DEFAULT_RETENTION, DEFAULT_RETRY, type ConsumerDeclaration } from './types';

export const CASE_EVENTS_TOPIC = 'regulatory.case.events.v1';
export const CASE_ACCEPTED = 'regulatory.case.accepted.v1';
export const CASE_STATUS_CHANGED = 'regulatory.case.status-changed.v1';

export const caseAcceptedPayload = z.object({
  caseId: z.string().min(1),
  acceptedAt: z.iso.datetime({ offset: true }),
});

export const caseStatusChangedPayload = z.object({
  caseId: z.string().min(1),
  newStatus: z.string().min(1),
});

/**
 * Seed 000's upsert, guarded by last_event_id so that a repeat is a no-op. Set-based: the
 * worker applies a whole batch of accepted events in one statement.
 */
const accepted = defineBatchHandler({
  payload: caseAcceptedPayload,
  async handleBatch(tx, events) {
    const rows = events.map((e) => ({
      case_id: e.payload.caseId,
      accepted_at: e.payload.acceptedAt,
      event_id: e.eventId,
      version: e.aggregateVersion ?? 0,
    }));
    await tx`
      insert into read_model.case_summary (case_id, case_status, accepted_at, last_event_id, last_aggregate_version, updated_at)
      select e.case_id, 'ACCEPTED', e.accepted_at, e.event_id, e.version, now()
      from json_to_recordset(${JSON.stringify(rows)}::text::json)
           as e(case_id text, accepted_at timestamptz, event_id text, version bigint)
      on conflict (case_id) do update
      set case_status = excluded.case_status,
          accepted_at = excluded.accepted_at,
          last_event_id = excluded.last_event_id,
          last_aggregate_version = greatest(read_model.case_summary.last_aggregate_version, excluded.last_aggregate_version),
          updated_at = now()
      where read_model.case_summary.last_event_id is distinct from excluded.last_event_id
        -- A versioned accepted event never rolls back a case that has moved past it
        -- (an operator replay of it, say).
        and (excluded.last_aggregate_version = 0
             or read_model.case_summary.last_aggregate_version < excluded.last_aggregate_version)`;
  },
});

/**
 * Seed 000's versioned update: applies only on top of the version before it. A version
 * at or below the last applied is a stale duplicate (no effect); a version further ahead
 * is a gap, held by the worker until its predecessor arrives or the wait runs out.
 */
const statusChanged = defineHandler({
  payload: caseStatusChangedPayload,
  async handle(tx, event) {
    const version = event.aggregateVersion;
    if (version === null) {
      throw new NonRetryableError('AGGREGATE_VERSION_MISSING', `${CASE_STATUS_CHANGED} needs aggregateVersion in its envelope`);
    }
    const updated = await tx`
      update read_model.case_summary
      set case_status = ${event.payload.newStatus},
          last_aggregate_version = ${version},
          last_event_id = ${event.eventId},
          updated_at = now()
      where case_id = ${event.payload.caseId}
        and last_aggregate_version = ${version - 1}`;
    if (updated.count === 1) return;

    const [current] = await tx<{ last_aggregate_version: number }[]>`
      select last_aggregate_version from read_model.case_summary where case_id = ${event.payload.caseId}`;
    if (current === undefined && version === 1) {
      await tx`
        insert into read_model.case_summary (case_id, case_status, last_event_id, last_aggregate_version, updated_at)
        values (${event.payload.caseId}, ${event.payload.newStatus}, ${event.eventId}, 1, now())`;
      return;
    }
    if (current !== undefined && current.last_aggregate_version >= version) return; // stale duplicate
    throw new AggregateVersionGapError(version - 1, current?.last_aggregate_version ?? null);
  },
});

export const caseProjection: ConsumerDeclaration = {
  name: 'case-projection',
  topics: [CASE_EVENTS_TOPIC],
  dialect: 'canonical',
  mode: 'deferred',
  handlers: {
    [CASE_ACCEPTED]: { 1: accepted },
    [CASE_STATUS_CHANGED]: { 1: statusChanged },
  },
  retry: DEFAULT_RETRY,
  retention: DEFAULT_RETENTION,
  // A case's events build on each other: a quarantined one holds the rest of its case.
  quarantinePolicy: 'hold-aggregate',
};
