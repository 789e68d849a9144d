/** case-sla: opens the initial-assessment SLA obligation when a case is accepted (seed 000). */
import { defineBatchHandler } from './dispatch';
import { DEFAULT_RETENTION, DEFAULT_RETRY, type ConsumerDeclaration } from './types';
import { CASE_ACCEPTED, CASE_EVENTS_TOPIC, caseAcceptedPayload } from './case-projection';

export const INITIAL_ASSESSMENT_DUE = 'INITIAL_ASSESSMENT_DUE';
const INITIAL_ASSESSMENT_DAYS = 5;

/**
 * Insert-if-absent: the partial unique index on (case_id, obligation_type) makes a repeat a
 * no-op. Set-based: the worker applies a whole batch in one statement.
 */
const accepted = defineBatchHandler({
  payload: caseAcceptedPayload,
  async handleBatch(tx, events) {
    const rows = events.map((e) => ({ case_id: e.payload.caseId, accepted_at: e.payload.acceptedAt, event_id: e.eventId }));
    await tx`
      insert into case_core.sla_obligation (case_id, obligation_type, due_at, source_event_id, status)
      select e.case_id, ${INITIAL_ASSESSMENT_DUE}, e.accepted_at + make_interval(days => ${INITIAL_ASSESSMENT_DAYS}),
             e.event_id, 'OPEN'
      from json_to_recordset(${JSON.stringify(rows)}::text::json) as e(case_id text, accepted_at timestamptz, event_id text)
      on conflict do nothing`;
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
};
