/**
 * Waking a consumer's worker: an asynchronous Lambda invocation (InvocationType Event)
 * carrying the slot reserved for it (functions/wings/wake-ups/worker-slot.ts). Sent by the ingest
 * function after it stored rows and found nobody awake, and by a worker that fans out or
 * hands over at the end of its budget. The worker's handler reads the event back here.
 *
 * A wake-up is an optimisation, never a duty: the schedule still runs the worker every
 * minute. So sending one never throws — a failure is logged (identifiers only) and counted
 * (WakeUpFailures) — and it is bounded in time: one attempt, short timeouts, and the
 * function's asynchronous invocation config neither retries nor keeps an old event.
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { z } from 'zod';
import { classifyError } from '../../lib/errors';
import { MetricNames, type MetricName } from '../../lib/metric-names';
import { count } from '../../lib/observability';

/**
 * How long an invited worker has to start and take its slot before the reservation lapses
 * and somebody else may be woken: a cold start in the VPC plus a first database connection
 * (an IAM token, TLS) take a second or two, and an asynchronous invocation can wait in
 * Lambda's queue for a while; an invocation that never starts costs at most this long.
 */
export const INVITATION_GRACE_SECONDS = 10;

/** Connecting to the Lambda API (a VPC endpoint in AWS) and its answer: an async Invoke returns 202 at once. */
export const WAKE_UP_CONNECT_TIMEOUT_MS = 500;
export const WAKE_UP_TIMEOUT_MS = 1_000;

export const WAKE_UP_SOURCES = ['wake-up', 'fan-out', 'hand-over'] as const;
export type WakeUpSource = (typeof WAKE_UP_SOURCES)[number];

const invitedEvent = z.object({
  source: z.enum(WAKE_UP_SOURCES),
  consumerName: z.string().min(1),
  slot: z.number().int().min(1),
  invitation: z.string().min(1),
});

/** What an invited worker receives: whose slot was reserved for it, and the invitation to present. */
export type InvitedEvent = z.output<typeof invitedEvent>;

/**
 * The events that carry no invitation: the schedule's (EventBridge Scheduler's input in
 * cdk/constructs/scheduled.ts) and ops resume's, which wakes a worker once the pause is
 * lifted. Either takes a free slot, if any.
 */
export const PLAIN_SOURCES = ['schedule', 'resume'] as const;
export type PlainEvent = { source: (typeof PLAIN_SOURCES)[number] };

/** What a worker can be invoked with: a plain event, or an invitation. */
export type WorkerEvent = PlainEvent | InvitedEvent;

export function isInvited(event: WorkerEvent): event is InvitedEvent {
  return 'invitation' in event;
}

/**
 * The event a worker was invoked with. Anything that is neither an invitation for this
 * consumer nor a plain event runs as a scheduled invocation: `unexpected` says so, for the log.
 */
export function readWorkerEvent(event: unknown, consumerName: string): { event: WorkerEvent; unexpected: boolean } {
  const invited = invitedEvent.safeParse(event);
  if (invited.success && invited.data.consumerName === consumerName) return { event: invited.data, unexpected: false };
  const source = typeof event === 'object' && event !== null ? (event as { source?: unknown }).source : undefined;
  const plain = PLAIN_SOURCES.find((s) => s === source);
  return { event: { source: plain ?? 'schedule' }, unexpected: plain === undefined };
}

/** A worker function to invoke, and the client to invoke it with. */
export interface WorkerTarget {
  lambda: Pick<LambdaClient, 'send'>;
  functionName: string;
}

/** The Lambda client a function wakes workers with: one attempt, short timeouts. */
export function wakeUpClient(): LambdaClient {
  return new LambdaClient({
    maxAttempts: 1,
    // Without throwOnRequestTimeout the SDK only warns when the timeout passes, and waits on.
    requestHandler: { connectionTimeout: WAKE_UP_CONNECT_TIMEOUT_MS, requestTimeout: WAKE_UP_TIMEOUT_MS, throwOnRequestTimeout: true },
  });
}

/** The metric each kind of wake-up is counted as. */
const SENT: Record<WakeUpSource, MetricName> = {
  'wake-up': MetricNames.WakeUpsSent,
  'fan-out': MetricNames.FanOutsSent,
  'hand-over': MetricNames.HandOversSent,
};

/** Invoke the worker asynchronously. Resolves whether Lambda accepted it; never throws. */
export async function sendWakeUp(
  target: WorkerTarget,
  event: InvitedEvent,
  observability: { logger: Logger; metrics: Metrics },
): Promise<boolean> {
  try {
    await target.lambda.send(
      new InvokeCommand({
        FunctionName: target.functionName,
        InvocationType: 'Event',
        Payload: Buffer.from(JSON.stringify(event)),
      }),
    );
    count(observability.metrics, SENT[event.source], 1);
    return true;
  } catch (error) {
    count(observability.metrics, MetricNames.WakeUpFailures, 1);
    observability.logger.warn('wake_up_failed', {
      consumerName: event.consumerName,
      source: event.source,
      slot: event.slot,
      stage: 'invoke',
      errorName: error instanceof Error ? error.name : typeof error,
      httpStatusCode: (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode,
    });
    return false;
  }
}

/**
 * A wake-up that failed at its gate (reserving the slot or invitations in the database):
 * counted and logged like a failed Invoke, with the error's code and SQLSTATE only.
 */
export function reportGateFailure(
  observability: { logger: Logger; metrics: Metrics },
  consumerName: string,
  source: WakeUpSource,
  error: unknown,
): void {
  const c = classifyError(error);
  count(observability.metrics, MetricNames.WakeUpFailures, 1);
  observability.logger.warn('wake_up_failed', { consumerName, source, stage: 'gate', errorCode: c.code, sqlState: c.sqlState });
}
