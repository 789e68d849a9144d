/**
 * An operator's action on inbox rows in each row's own trace (docs/tracing.md): a span per
 * row, a child of the context its producer sent, once the action committed. So the trace
 * of a quarantined event shows the replay or resolve between its attempts.
 */
import { SpanKind } from '@opentelemetry/api';
import type { QuarantinedCandidate } from './queries/quarantine-action';
import { contextOf, tracer } from '../lib/tracing';

export function traceOperatorAction(
  action: 'replay' | 'resolve',
  rows: readonly QuarantinedCandidate[],
  audit: { auditId: string; actor: string },
): void {
  for (const row of rows) {
    tracer()
      .startSpan(
        `ops ${action}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'inbox.consumer': row.consumer_name,
            'messaging.message.id': row.event_id,
            'inbox.event_type': row.event_type,
            'inbox.operator_action': action,
            'inbox.audit_id': audit.auditId,
            'inbox.actor': audit.actor,
            ...(row.error_code === null ? {} : { 'inbox.error_code': row.error_code }),
          },
        },
        contextOf(row.trace_context),
      )
      .end();
  }
}
