/**
 * The regulatory-case envelope of an accepted case (the canonical dialect), for the tests and
 * benchmarks that store one: `case-projection` and `case-sla` read it.
 */
export function caseAccepted(caseId: string, eventId: string, payload: Record<string, unknown> = {}) {
  return {
    eventId,
    eventType: 'regulatory.case.accepted.v1',
    eventVersion: 1,
    occurredAt: '2026-07-03T09:15:30Z',
    producer: 'case-command-service',
    aggregateType: 'case',
    aggregateId: caseId,
    payload: { caseId, acceptedAt: '2026-07-03T09:15:30Z', ...payload },
  };
}
