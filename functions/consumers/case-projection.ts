/** case-projection: keeps read_model.case_summary from the regulatory case events (the case inbox design). */
import { type z } from 'zod';
import {
  AggregateVersionGapError,
  NonRetryableError,
  defineBatchHandler,
  DEFAULT_RETENTION,
  DEFAULT_RETRY,
  type ConsumerDeclaration,
  type InboxEvent,
  type TransactionSql,
} from '../framework';
import { caseAudit } from './case-audit';
import { CASE_ACCEPTED, CASE_EVENTS_TOPIC, CASE_STATUS_CHANGED, caseAcceptedPayload, caseStatusChangedPayload } from './case-events';

// The case events' contract, shared with case-sla (./case-events.ts); re-exported for its readers.
export { CASE_ACCEPTED, CASE_EVENTS_TOPIC, CASE_STATUS_CHANGED, caseAcceptedPayload, caseStatusChangedPayload } from './case-events';

/** The audit changes of case-projection (case_core.case_audit.change). */
export const CaseProjectionChanges = {
  CASE_ACCEPTED: 'CASE_ACCEPTED',
  CASE_STATUS_CHANGED: 'CASE_STATUS_CHANGED',
} as const;

/**
 * The case inbox design's upsert, guarded by last_event_id so that a repeat is a no-op. Set-based: the
 * worker applies a whole batch of accepted events in one statement, which also returns
 * each case's state before it (the CTEs share the statement's snapshot) for the audit.
 * A repeat or a version the case moved past returns nothing: nothing applied, no audit.
 */
const accepted = defineBatchHandler({
  payload: caseAcceptedPayload,
  async handleBatch(tx, events, context) {
    const rows = events.map((e) => ({
      case_id: e.payload.caseId,
      accepted_at: e.payload.acceptedAt,
      event_id: e.eventId,
      version: e.aggregateVersion ?? 0,
    }));
    const applied = await tx<{ case_id: string; event_id: string; before_status: string | null; accepted_at: Date }[]>`
      with input as materialized (
        select e.case_id, e.accepted_at, e.event_id, e.version
        from json_to_recordset(${JSON.stringify(rows)}::text::json)
             as e(case_id text, accepted_at timestamptz, event_id text, version bigint)
      ),
      prior as (
        select s.case_id, s.case_status from read_model.case_summary s
        where s.case_id = any(${rows.map((r) => r.case_id)}::text[])
      ),
      upserted as (
        insert into read_model.case_summary (case_id, case_status, accepted_at, last_event_id, last_aggregate_version, updated_at)
        select e.case_id, 'ACCEPTED', e.accepted_at, e.event_id, e.version, now()
        from input e
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
               or read_model.case_summary.last_aggregate_version < excluded.last_aggregate_version)
        returning case_id, last_event_id, accepted_at
      )
      select u.case_id, u.last_event_id as event_id, p.case_status as before_status, u.accepted_at
      from upserted u left join prior p on p.case_id = u.case_id`;
    const byId = new Map(events.map((e) => [e.eventId, e]));
    await context.audit(
      applied.map((a) => ({
        source: byId.get(a.event_id)!,
        subjectId: a.case_id,
        change: CaseProjectionChanges.CASE_ACCEPTED,
        before: a.before_status === null ? null : { status: a.before_status },
        after: { status: 'ACCEPTED', acceptedAt: a.accepted_at.toISOString() },
      })),
    );
  },
});

type StatusChanged = InboxEvent<z.output<typeof caseStatusChangedPayload>>;

interface StatusChange {
  event: StatusChanged;
  /** The case's status before the event, null when the event created the summary. */
  before: string | null;
}

/** The version an event builds on; an event without one cannot be ordered. */
function versionOf(event: StatusChanged): number {
  if (event.aggregateVersion === null) {
    throw new NonRetryableError('AGGREGATE_VERSION_MISSING', `${CASE_STATUS_CHANGED} needs aggregateVersion in its envelope`);
  }
  return event.aggregateVersion;
}

/** The outcome of an event that did not apply: a stale duplicate (nothing), or a gap (thrown). */
function notApplied(event: StatusChanged, currentVersion: number | null): void {
  const version = versionOf(event);
  if (currentVersion !== null && currentVersion >= version) return; // stale duplicate
  throw new AggregateVersionGapError(version - 1, currentVersion);
}

/** One event: the versioned update, else the first version's insert — two small statements. */
async function applyOne(tx: TransactionSql, event: StatusChanged): Promise<StatusChange[]> {
  const version = versionOf(event);
  const { caseId, newStatus } = event.payload;
  // prior is read in the statement's snapshot: the status this update replaces.
  const [updated] = await tx<{ before_status: string }[]>`
    with prior as (select case_id, case_status from read_model.case_summary where case_id = ${caseId})
    update read_model.case_summary s
    set case_status = ${newStatus},
        last_aggregate_version = ${version},
        last_event_id = ${event.eventId},
        updated_at = now()
    from prior p
    where s.case_id = p.case_id
      and s.last_aggregate_version = ${version - 1}
    returning p.case_status as before_status`;
  if (updated !== undefined) return [{ event, before: updated.before_status }];

  const [current] = await tx<{ last_aggregate_version: number }[]>`
    select last_aggregate_version from read_model.case_summary where case_id = ${caseId}`;
  if (current === undefined && version === 1) {
    await tx`
      insert into read_model.case_summary (case_id, case_status, last_event_id, last_aggregate_version, updated_at)
      values (${caseId}, ${newStatus}, ${event.eventId}, 1, now())`;
    return [{ event, before: null }];
  }
  notApplied(event, current?.last_aggregate_version ?? null);
  return [];
}

/**
 * Many events (at most one per aggregate) in one statement, which returns per event whether
 * it applied and its case's state before it, read in the statement's snapshot and keyed by
 * event (two aggregates' events may name one case). An event that neither applied nor is a
 * stale duplicate by that snapshot — a gap, or the second of two events for one case — throws,
 * and the worker's slow path splits the batch until each part decides (a gap's own lane runs
 * one event at a time), in claim order, so only a real gap is held.
 */
async function applyMany(tx: TransactionSql, events: readonly StatusChanged[]): Promise<StatusChange[]> {
  const rows = events.map((e) => ({
    case_id: e.payload.caseId,
    new_status: e.payload.newStatus,
    event_id: e.eventId,
    version: versionOf(e),
  }));
  // The cases as an array too: `= any(array)` finds them through the primary key whatever
  // the table's statistics say (a join with the JSON input may be planned as a scan).
  const caseIds = rows.map((r) => r.case_id);
  const results = await tx<{ event_id: string; before_status: string | null; current_version: number | null; applied: boolean }[]>`
    with input as materialized (
      select e.case_id, e.new_status, e.event_id, e.version
      from json_to_recordset(${JSON.stringify(rows)}::text::json)
           as e(case_id text, new_status text, event_id text, version bigint)
    ),
    prior as (
      select s.case_id, s.case_status, s.last_aggregate_version from read_model.case_summary s
      where s.case_id = any(${caseIds}::text[])
    ),
    updated as (
      update read_model.case_summary s
      set case_status = i.new_status,
          last_aggregate_version = i.version,
          last_event_id = i.event_id,
          updated_at = now()
      from input i
      where s.case_id = any(${caseIds}::text[])
        and s.case_id = i.case_id
        and s.last_aggregate_version = i.version - 1
      returning i.event_id
    ),
    created as (
      insert into read_model.case_summary (case_id, case_status, last_event_id, last_aggregate_version, updated_at)
      select i.case_id, i.new_status, i.event_id, 1, now()
      from input i
      where i.version = 1 and not exists (select from prior p where p.case_id = i.case_id)
      returning last_event_id as event_id
    )
    select i.event_id, p.case_status as before_status, p.last_aggregate_version as current_version,
           (u.event_id is not null or c.event_id is not null) as applied
    from input i
    left join prior p on p.case_id = i.case_id
    left join updated u on u.event_id = i.event_id
    left join created c on c.event_id = i.event_id`;
  const byId = new Map(events.map((e) => [e.eventId, e]));
  const changes: StatusChange[] = [];
  for (const r of results) {
    const event = byId.get(r.event_id)!;
    if (r.applied) changes.push({ event, before: r.before_status });
    else notApplied(event, r.current_version);
  }
  return changes;
}

/**
 * The case inbox design's versioned update: applies only on top of the version before it. A
 * version at or below the last applied is a stale duplicate (no effect, no audit); a version
 * further ahead is a gap, held by the worker until its predecessor arrives or the wait runs
 * out. A case's first version creates its summary when there is none. Set-based, as
 * `accepted`, for a batch; one event (the worker's fallback, or a batch of one) takes the two
 * small statements, cheaper to plan than the batch's one.
 */
const statusChanged = defineBatchHandler({
  payload: caseStatusChangedPayload,
  async handleBatch(tx, events, context) {
    const changes = events.length === 1 ? await applyOne(tx, events[0]!) : await applyMany(tx, events);
    await context.audit(
      changes.map(({ event, before }) => ({
        source: event,
        subjectId: event.payload.caseId,
        change: CaseProjectionChanges.CASE_STATUS_CHANGED,
        before: before === null ? null : { status: before },
        after: { status: event.payload.newStatus, aggregateVersion: event.aggregateVersion! },
      })),
    );
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
  audit: caseAudit,
  tables: {
    // Upsert and versioned update of the summary.
    'read_model.case_summary': { select: true, insert: true, update: true },
    'case_core.case_audit': { insert: true },
  },
};
