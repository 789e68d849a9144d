/**
 * case-sla: opens the initial-assessment SLA obligation when a case is accepted (the case inbox design),
 * audits it and tells downstream: regulatory.case.sla-obligation-opened.v1, through the
 * outbox, in the transaction that opens the obligation.
 */
import { caseAudit } from './case-audit';
import { defineBatchHandler, DEFAULT_RETENTION, DEFAULT_RETRY, type ConsumerDeclaration } from '../framework';
import { CASE_ACCEPTED, CASE_EVENTS_TOPIC, caseAcceptedPayload } from './case-events';

export const INITIAL_ASSESSMENT_DUE = 'INITIAL_ASSESSMENT_DUE';
const INITIAL_ASSESSMENT_DAYS = 5;

/** What case-sla emits, and where. */
export const SLA_OBLIGATION_OPENED = 'regulatory.case.sla-obligation-opened.v1';
export const SLA_OBLIGATIONS_TOPIC = 'regulatory.case.sla-obligations.v1';
/** The audit change of case-sla (case_core.case_audit.change). */
export const SLA_OBLIGATION_OPENED_CHANGE = 'SLA_OBLIGATION_OPENED';

/**
 * Insert-if-absent: the partial unique index on (case_id, obligation_type) makes a repeat a
 * no-op. Set-based: the worker applies a whole batch in one statement. Only the obligations
 * this statement created come back, so an obligation that already existed is neither
 * audited nor announced again.
 */
const accepted = defineBatchHandler({
  payload: caseAcceptedPayload,
  async handleBatch(tx, events, context) {
    const rows = events.map((e) => ({ case_id: e.payload.caseId, accepted_at: e.payload.acceptedAt, event_id: e.eventId }));
    const opened = await tx<{ case_id: string; obligation_type: string; due_at: Date; source_event_id: string }[]>`
      insert into case_core.sla_obligation (case_id, obligation_type, due_at, source_event_id, status)
      select e.case_id, ${INITIAL_ASSESSMENT_DUE}, e.accepted_at + make_interval(days => ${INITIAL_ASSESSMENT_DAYS}),
             e.event_id, 'OPEN'
      from json_to_recordset(${JSON.stringify(rows)}::text::json) as e(case_id text, accepted_at timestamptz, event_id text)
      on conflict do nothing
      returning case_id, obligation_type, due_at, source_event_id`;
    if (opened.length === 0) return;
    const byId = new Map(events.map((e) => [e.eventId, e]));
    const obligations = opened.map((o) => ({
      source: byId.get(o.source_event_id)!,
      caseId: o.case_id,
      obligation: { caseId: o.case_id, obligationType: o.obligation_type, dueAt: o.due_at.toISOString() },
    }));
    await Promise.all([
      context.audit(
        obligations.map((o) => ({
          source: o.source,
          subjectId: o.caseId,
          change: SLA_OBLIGATION_OPENED_CHANGE,
          before: null,
          after: { obligationType: o.obligation.obligationType, dueAt: o.obligation.dueAt, status: 'OPEN' },
        })),
      ),
      context.emit(
        obligations.map((o) => ({ source: o.source, eventType: SLA_OBLIGATION_OPENED, aggregateId: o.caseId, payload: o.obligation })),
      ),
    ]);
  },
});

export const caseSla: ConsumerDeclaration = {
  name: 'case-sla',
  topics: [CASE_EVENTS_TOPIC],
  dialect: 'canonical',
  mode: 'deferred',
  handlers: {
    [CASE_ACCEPTED]: { 1: accepted },
  },
  // Every other case event is not this consumer's business.
  ignores: (eventType) => eventType.startsWith('regulatory.case.') && eventType !== CASE_ACCEPTED,
  retry: DEFAULT_RETRY,
  retention: DEFAULT_RETENTION,
  // A case's events build on each other: a quarantined one holds the rest of its case.
  quarantinePolicy: 'hold-aggregate',
  audit: caseAudit,
  emits: {
    [SLA_OBLIGATION_OPENED]: { topic: SLA_OBLIGATIONS_TOPIC, eventVersion: 1, aggregateType: 'case' },
  },
  tables: {
    // Insert-if-absent, and SELECT of what its RETURNING reads: did it open the obligation?
    'case_core.sla_obligation': { insert: true, select: ['case_id', 'obligation_type', 'due_at', 'source_event_id'] },
    'case_core.case_audit': { insert: true },
  },
};
