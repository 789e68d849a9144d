/**
 * One event's story as the `event` command tells it (commands/event.ts): its row, the
 * operator actions on it, the poison rows of its record and its consumer's pauses, put
 * together with every recorded moment in one timeline.
 */
import { spanContextOf } from '../lib/tracing';
import type { ConsumedEventRow, EventPoisonRow, EventRow } from './queries/find-event';
import type { PauseRow } from '../inbox/consumer-pause';
import type { ActionOnRows } from './queries/operator-audit';
import { pauseView, type PauseView } from './pause-targets';

export interface TimelineEntry {
  at: Date;
  what: string;
}

export interface EventStory {
  consumer: string;
  inboxId: string;
  eventId: string;
  eventType: string;
  eventVersion: number;
  status: EventRow['status'];
  attempts: number;
  kafka: { topic: string; partition: number; offset: number; key: string | null; keyEncoding: string; partitionKey: string | null };
  trace: {
    producer: string;
    correlationId: string | null;
    causationId: string | null;
    tenantId: string | null;
    /** The OpenTelemetry trace its producer started (docs/tracing.md): every attempt, replay and emitted event is in it. */
    traceId: string | null;
  };
  times: {
    occurredAt: Date;
    receivedAt: Date;
    lockedAt: Date | null;
    nextAttemptAt: Date | null;
    processedAt: Date | null;
    quarantinedAt: Date | null;
    payloadPurgedAt: Date | null;
    updatedAt: Date;
  };
  /** Present while the row is in flight (PROCESSING). */
  lease: { owner: string | null; lockedAt: Date | null; expiresAt: Date | null; expired: boolean | null } | null;
  error: { code: string | null; message: string | null; detail: unknown } | null;
  aggregate: {
    type: string;
    id: string;
    version: number | null;
    /** Its first open row, in the order the worker claims them; null when nothing of it is open. */
    head: { inboxId: string; eventId: string; status: string; version: number | null } | null;
    isHead: boolean;
    openAhead: number;
    openBehind: number;
    quarantinedOthers: number;
  };
  /** Operator actions that changed this row (replay, resolve, reingest). */
  actions: Omit<ActionOnRows, 'touched'>[];
  /** The consumer's pauses now (ops pause): a paused consumer's row waits for the resume. */
  consumerPaused: PauseView[];
  /** The poison rows of the same record (listed in the result's `poison`). */
  poisonIds: string[];
  /** Every recorded moment, oldest first. */
  timeline: TimelineEntry[];
  payload?: unknown;
  headers?: unknown;
}

const ACTION_WORDS: Record<string, string> = { replay: 'replayed', resolve: 'resolved', reingest: 're-ingested from poison' };

/**
 * An event whose row left the inbox at its payload retention: what its kept key says
 * (integration.consumed_events). Payload, attempts and aggregate are gone with the row.
 */
export interface LeftEventStory {
  consumer: string;
  inboxId: string;
  eventId: string;
  eventType: string;
  status: ConsumedEventRow['status'];
  kafka: { topic: string; partition: number; offset: number };
  times: { receivedAt: Date; processedAt: Date; quarantinedAt: Date | null };
  errorCode: string | null;
  /** A redelivery is a duplicate until then. */
  dedupeUntil: Date;
  actions: Omit<ActionOnRows, 'touched'>[];
  poisonIds: string[];
  timeline: TimelineEntry[];
}

export function leftStoryOf(
  key: ConsumedEventRow,
  allActions: readonly ActionOnRows[],
  allPoison: readonly EventPoisonRow[],
): LeftEventStory {
  const actions = allActions.filter((a) => a.touched.includes(key.inbox_id));
  const poison = allPoison.filter(
    (p) =>
      p.resolved_inbox_id === key.inbox_id ||
      (p.consumer_name === key.consumer_name &&
        p.topic_name === key.topic_name &&
        p.partition_no === key.partition_no &&
        p.offset_no === key.offset_no),
  );
  const timeline: (TimelineEntry | null)[] = [
    ...poison.map((p) => ({ at: p.created_at, what: `poisoned: ${p.error_code ?? '?'} (poison ${p.poison_id})` })),
    { at: key.received_at, what: `received by ${key.consumer_name}` },
    key.quarantined_at !== null ? { at: key.quarantined_at, what: 'quarantined' } : null,
    ...actions.map((a) => ({
      at: a.created_at,
      what: `${ACTION_WORDS[a.action] ?? a.action} by ${a.actor ?? '?'}${a.reason !== null ? `: ${a.reason}` : ''} (audit ${a.audit_id})`,
    })),
    { at: key.processed_at, what: key.status === 'IGNORED' ? 'ignored' : 'processed' },
    { at: key.dedupe_until, what: 'dedupe window ends: a redelivery is new after this' },
  ];
  return {
    consumer: key.consumer_name,
    inboxId: key.inbox_id,
    eventId: key.event_id,
    eventType: key.event_type,
    status: key.status,
    kafka: { topic: key.topic_name, partition: key.partition_no, offset: key.offset_no },
    times: { receivedAt: key.received_at, processedAt: key.processed_at, quarantinedAt: key.quarantined_at },
    errorCode: key.error_code,
    dedupeUntil: key.dedupe_until,
    actions: actions.map(({ touched: _, ...a }) => a),
    poisonIds: poison.map((p) => p.poison_id),
    timeline: timeline.filter((e): e is TimelineEntry => e !== null).sort((a, b) => a.at.getTime() - b.at.getTime()),
  };
}

/** A poison row is part of a row's story when it became that row, or was stored for the same consumer and offset. */
function belongsTo(p: EventPoisonRow, row: EventRow): boolean {
  return (
    p.resolved_inbox_id === row.inbox_id ||
    (p.consumer_name === row.consumer_name &&
      p.topic_name === row.topic_name &&
      p.partition_no === row.partition_no &&
      p.offset_no === row.offset_no)
  );
}

function timelineOf(row: EventRow, actions: readonly ActionOnRows[], poison: readonly EventPoisonRow[]): TimelineEntry[] {
  const entries: (TimelineEntry | null)[] = [
    { at: row.occurred_at, what: `occurred (${row.producer}'s clock)` },
    ...poison.map((p) => ({ at: p.created_at, what: `poisoned: ${p.error_code ?? '?'} (poison ${p.poison_id})` })),
    { at: row.received_at, what: `received by ${row.consumer_name}` },
    row.status === 'PROCESSING' && row.locked_at !== null
      ? { at: row.locked_at, what: `claimed by ${row.locked_by ?? '?'} (attempt ${row.attempt_count})` }
      : null,
    row.quarantined_at !== null ? { at: row.quarantined_at, what: `quarantined: ${row.error_code ?? '?'}` } : null,
    ...actions.map((a) => ({
      at: a.created_at,
      what: `${ACTION_WORDS[a.action] ?? a.action} by ${a.actor ?? '?'}${a.reason !== null ? `: ${a.reason}` : ''} (audit ${a.audit_id})`,
    })),
    row.processed_at !== null ? { at: row.processed_at, what: row.status === 'IGNORED' ? 'ignored' : 'processed' } : null,
    row.payload_purged_at !== null ? { at: row.payload_purged_at, what: 'payload purged (retention)' } : null,
    row.status === 'RETRY_PENDING' && row.next_attempt_at !== null
      ? { at: row.next_attempt_at, what: `next attempt due (${row.error_code ?? 'retry'})` }
      : null,
    row.status === 'PROCESSING' && row.lease_expires_at !== null
      ? { at: row.lease_expires_at, what: row.lease_expired ? 'lease expired (the reaper returns it)' : 'lease expires' }
      : null,
  ];
  return entries.filter((e): e is TimelineEntry => e !== null).sort((a, b) => a.at.getTime() - b.at.getTime());
}

export function storyOf(
  row: EventRow,
  allActions: readonly ActionOnRows[],
  allPoison: readonly EventPoisonRow[],
  pauses: readonly PauseRow[],
): EventStory {
  const actions = allActions.filter((a) => a.touched.includes(row.inbox_id));
  const poison = allPoison.filter((p) => belongsTo(p, row));
  return {
    consumer: row.consumer_name,
    inboxId: row.inbox_id,
    eventId: row.event_id,
    eventType: row.event_type,
    eventVersion: row.event_version,
    status: row.status,
    attempts: row.attempt_count,
    kafka: {
      topic: row.topic_name,
      partition: row.partition_no,
      offset: row.offset_no,
      key: row.record_key,
      keyEncoding: row.record_key_encoding,
      partitionKey: row.partition_key,
    },
    trace: {
      producer: row.producer,
      correlationId: row.correlation_id,
      causationId: row.causation_id,
      tenantId: row.tenant_id,
      traceId: spanContextOf(row.trace_context)?.traceId ?? null,
    },
    times: {
      occurredAt: row.occurred_at,
      receivedAt: row.received_at,
      lockedAt: row.locked_at,
      nextAttemptAt: row.next_attempt_at,
      processedAt: row.processed_at,
      quarantinedAt: row.quarantined_at,
      payloadPurgedAt: row.payload_purged_at,
      updatedAt: row.updated_at,
    },
    lease:
      row.status === 'PROCESSING'
        ? { owner: row.locked_by, lockedAt: row.locked_at, expiresAt: row.lease_expires_at, expired: row.lease_expired }
        : null,
    error:
      row.error_code === null && row.error_message === null
        ? null
        : { code: row.error_code, message: row.error_message, detail: row.error_detail },
    aggregate: {
      type: row.aggregate_type,
      id: row.aggregate_id,
      version: row.aggregate_version,
      head:
        row.head_inbox_id === null
          ? null
          : { inboxId: row.head_inbox_id, eventId: row.head_event_id!, status: row.head_status!, version: row.head_aggregate_version },
      isHead: row.head_inbox_id === row.inbox_id,
      openAhead: row.open_ahead,
      openBehind: row.open_behind,
      quarantinedOthers: row.quarantined_in_aggregate,
    },
    actions: actions.map(({ touched: _, ...a }) => a),
    consumerPaused: pauses.filter((p) => p.consumer_name === row.consumer_name).map(pauseView),
    poisonIds: poison.map((p) => p.poison_id),
    timeline: timelineOf(row, actions, poison),
    ...('payload' in row ? { payload: row.payload, headers: row.headers } : {}),
  };
}
