/**
 * The case consumers' audit trail (HandlerContext.audit): case_core.case_audit, one row per
 * applied effect (migration 0080), written in the handler's transaction.
 */
import type { AuditTrail } from '../framework';

export const caseAudit: AuditTrail = async (tx, consumerName, entries) => {
  if (entries.length === 0) return;
  const rows = entries.map((e) => ({
    case_id: e.subjectId,
    source_event_id: e.source.eventId,
    change: e.change,
    before_value: e.before ?? null,
    after_value: e.after ?? null,
  }));
  await tx`
    insert into case_core.case_audit (case_id, consumer_name, source_event_id, change, before_value, after_value)
    select r.case_id, ${consumerName}, r.source_event_id, r.change, r.before_value, r.after_value
    from json_to_recordset(${JSON.stringify(rows)}::text::json)
         as r(case_id text, source_event_id text, change text, before_value jsonb, after_value jsonb)`;
};
