/** case-sla: opens the initial-assessment SLA obligation when a case is accepted (seed 000). */
import { defineHandler, DEFAULT_RETENTION, DEFAULT_RETRY, type ConsumerDeclaration } from './types';
import { CASE_ACCEPTED, CASE_EVENTS_TOPIC, caseAcceptedPayload } from './case-projection';

export const INITIAL_ASSESSMENT_DUE = 'INITIAL_ASSESSMENT_DUE';
const INITIAL_ASSESSMENT_DAYS = 5;

/** Insert-if-absent: the partial unique index on (case_id, obligation_type) makes a repeat a no-op. */
const accepted = defineHandler({
  payload: caseAcceptedPayload,
  async handle(tx, event) {
    await tx`
      insert into case_core.sla_obligation (case_id, obligation_type, due_at, source_event_id, status)
      values (${event.payload.caseId}, ${INITIAL_ASSESSMENT_DUE},
              ${event.payload.acceptedAt}::timestamptz + make_interval(days => ${INITIAL_ASSESSMENT_DAYS}),
              ${event.eventId}, 'OPEN')
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
};
