/**
 * The regulatory case events as the case consumers read them: topic, types and payloads.
 * The contract of the events, not of a consumer: case-projection and case-sla each import it,
 * and neither imports the other, so each one's functions bundle its own module only.
 */
import { z } from 'zod';
import { identifier } from '../framework';

export const CASE_EVENTS_TOPIC = 'regulatory.case.events.v1';
export const CASE_ACCEPTED = 'regulatory.case.accepted.v1';
export const CASE_STATUS_CHANGED = 'regulatory.case.status-changed.v1';

export const caseAcceptedPayload = z.object({
  // Written into case_summary's, sla_obligation's and case_audit's keys: bounded.
  caseId: identifier,
  acceptedAt: z.iso.datetime({ offset: true }),
});

export const caseStatusChangedPayload = z.object({
  caseId: identifier,
  newStatus: z.string().min(1),
});
