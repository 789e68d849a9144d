/**
 * The operator commands, one function each, shared by the ops Lambda and the CLI. Each
 * takes its dependencies explicitly and arguments already validated by ./schemas.ts; the
 * SQL lives in functions/inbox/. What an operator may get wrong (an unknown consumer, a
 * replay without a reason, a selection that matches nothing) is an OpsError with a code.
 */
import { userInfo } from 'node:os';
import {
  CreateScheduleCommand,
  GetScheduleCommand,
  ResourceNotFoundException,
  UpdateScheduleCommand,
  type CreateScheduleCommandInput,
  type GetScheduleCommandOutput,
  type SchedulerClient,
  type UpdateScheduleCommandInput,
} from '@aws-sdk/client-scheduler';
import { CONSUMERS } from '../consumers';
import type { ConsumerDeclaration } from '../consumers/types';
import { insertInboxBatch } from '../inbox/insert-batch';
import { getPoison, listPoison, resolvePoison, type PoisonRow } from '../inbox/poison';
import { listQuarantined, quarantineSummary } from '../inbox/quarantine';
import {
  countReplayable,
  inboxStatuses,
  previewReplay,
  replayQuarantined,
  type ReplayCandidate,
  type ReplaySelection,
} from '../inbox/replay';
import { inboxStatusCounts, poisonCounts } from '../inbox/stats';
import type { InboxStatus } from '../inbox/types';
import { decodeRecord } from '../ingest/decode';
import type { KafkaRecord } from '../ingest/types';
import type { Config } from '../lib/config';
import type { Sql } from '../lib/db';
import { OpsError, OpsErrorCodes } from './errors';
import { REPLAY_SCHEDULE_PREFIX, schemas, type CommandArgs } from './schemas';

/** The little a command logs: identifiers and counts, never payloads. */
export interface OpsLogger {
  info(message: string, extra: Record<string, unknown>): void;
}

export interface OpsDeps {
  sql: Sql;
  /** Only the schedule commands use it. */
  scheduler: Pick<SchedulerClient, 'send'>;
  config: Pick<Config, 'scheduler' | 'maxPayloadBytes'>;
  /** The declared consumers (default: functions/consumers). */
  consumers?: readonly ConsumerDeclaration[];
  /** The wall clock, for validating schedule times (database work uses now() in SQL). */
  now?: () => Date;
  logger?: OpsLogger;
}

/** How the command was invoked: the CLI knows the OS user; the Lambda must be told the actor. */
export interface Invocation {
  source: 'cli' | 'lambda';
  defaultActor?: string | undefined;
  /** The ops Lambda's own ARN (from its context): the target of a scheduled replay. */
  invokedFunctionArn?: string | undefined;
}

const STATUSES: readonly InboxStatus[] = ['RECEIVED', 'PROCESSING', 'PROCESSED', 'RETRY_PENDING', 'QUARANTINED', 'IGNORED'];

function consumersOf(deps: OpsDeps): readonly ConsumerDeclaration[] {
  return deps.consumers ?? CONSUMERS;
}

function knownConsumer(deps: OpsDeps, name: string): ConsumerDeclaration {
  const consumer = consumersOf(deps).find((c) => c.name === name);
  if (consumer === undefined) {
    const known = consumersOf(deps).map((c) => c.name);
    throw new OpsError(OpsErrorCodes.UNKNOWN_CONSUMER, `unknown consumer "${name}" (known: ${known.join(', ')})`, { known });
  }
  return consumer;
}

function optionalConsumer(deps: OpsDeps, name: string | undefined): string | undefined {
  return name === undefined ? undefined : knownConsumer(deps, name).name;
}

function actorOf(args: { actor?: string | undefined }, inv: Invocation): string {
  const actor = args.actor ?? inv.defaultActor;
  if (actor === undefined || actor.trim() === '') {
    throw new OpsError(OpsErrorCodes.ACTOR_REQUIRED, 'this command changes state: say who you are with actor');
  }
  return actor;
}

/** The OS user running the CLI, when the platform can tell. */
export function osUser(): string | undefined {
  try {
    return userInfo().username || undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------
// Opaque page cursors: base64url of {at, id}. Opaque so that nobody builds one by hand
// from a rounded timestamp (JavaScript dates lose PostgreSQL's microseconds).

export function encodeCursor(cursor: { at: string; id: string } | null): string | null {
  return cursor === null ? null : Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): { at: string; id: string } | undefined {
  if (cursor === undefined) return undefined;
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (
      typeof v === 'object' && v !== null &&
      typeof (v as { at?: unknown }).at === 'string' && !Number.isNaN(Date.parse((v as { at: string }).at)) &&
      typeof (v as { id?: unknown }).id === 'string' && /^[0-9a-f-]{36}$/i.test((v as { id: string }).id)
    ) {
      return { at: (v as { at: string }).at, id: (v as { id: string }).id };
    }
  } catch {
    // fall through
  }
  throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'cursor: not a cursor returned by a previous page');
}

// ---------------------------------------------------------------------------------------
// stats

export interface ConsumerStats {
  consumer: string;
  /** False for rows of a consumer no longer declared. */
  declared: boolean;
  statuses: Record<InboxStatus, number>;
  total: number;
  due: number;
  oldestDueAgeSeconds: number | null;
  quarantined: number;
  poisonUnresolved: number;
  oldestPoisonAgeSeconds: number | null;
}

export async function stats(deps: OpsDeps, args: CommandArgs<'stats'>): Promise<{ consumers: ConsumerStats[] }> {
  const only = optionalConsumer(deps, args.consumer);
  const [counts, poison] = await Promise.all([inboxStatusCounts(deps.sql, only), poisonCounts(deps.sql, only)]);
  const declared = new Set(consumersOf(deps).map((c) => c.name));
  const names = new Set(only !== undefined ? [only] : [...declared]);
  for (const r of counts) names.add(r.consumer_name);
  for (const p of poison) names.add(p.consumer_name);

  const consumers = [...names].sort().map((name): ConsumerStats => {
    const statuses = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<InboxStatus, number>;
    let due = 0;
    let oldest: number | null = null;
    for (const r of counts.filter((c) => c.consumer_name === name)) {
      statuses[r.status] = r.count;
      due += r.due;
      if (r.oldest_due_age_seconds !== null) oldest = Math.max(oldest ?? 0, r.oldest_due_age_seconds);
    }
    const p = poison.find((x) => x.consumer_name === name);
    return {
      consumer: name,
      declared: declared.has(name),
      statuses,
      total: Object.values(statuses).reduce((a, b) => a + b, 0),
      due,
      oldestDueAgeSeconds: oldest,
      quarantined: statuses.QUARANTINED,
      poisonUnresolved: p?.unresolved ?? 0,
      oldestPoisonAgeSeconds: p?.oldest_unresolved_age_seconds ?? null,
    };
  });
  return { consumers };
}

// ---------------------------------------------------------------------------------------
// quarantine

export async function quarantine(deps: OpsDeps, args: CommandArgs<'quarantine'>) {
  return { summary: await quarantineSummary(deps.sql, optionalConsumer(deps, args.consumer)) };
}

export async function quarantineList(deps: OpsDeps, args: CommandArgs<'quarantine-list'>) {
  const page = await listQuarantined(deps.sql, {
    consumerName: optionalConsumer(deps, args.consumer),
    errorCode: args.errorCode,
    eventType: args.eventType,
    after: decodeCursor(args.cursor),
    limit: args.limit,
    includePayload: args.includePayload,
  });
  return { rows: page.rows, nextCursor: encodeCursor(page.next) };
}

// ---------------------------------------------------------------------------------------
// replay

type ReplayArgs = Pick<CommandArgs<'replay'>, 'ids' | 'consumer' | 'errorCode' | 'eventType' | 'from' | 'to'>;

function selectionOf(deps: OpsDeps, args: ReplayArgs): ReplaySelection {
  if (args.ids !== undefined) return { inboxIds: [...new Set(args.ids.map((id) => id.toLowerCase()))] };
  return {
    consumerName: knownConsumer(deps, args.consumer!).name,
    ...(args.errorCode !== undefined ? { errorCode: args.errorCode } : {}),
    ...(args.eventType !== undefined ? { eventType: args.eventType } : {}),
    ...(args.from !== undefined ? { quarantinedFrom: args.from } : {}),
    ...(args.to !== undefined ? { quarantinedTo: args.to } : {}),
  };
}

/** Ids the operator named that a replay does not take, and why. */
async function skippedIds(deps: OpsDeps, selection: ReplaySelection, taken: readonly ReplayCandidate[]) {
  if (!('inboxIds' in selection)) return [];
  const takenIds = new Set(taken.map((r) => r.inbox_id));
  const rest = selection.inboxIds.filter((id) => !takenIds.has(id));
  if (rest.length === 0) return [];
  const found = new Map((await inboxStatuses(deps.sql, rest)).map((r) => [r.inbox_id, r.status]));
  return rest.map((id) => ({ inboxId: id, reason: found.has(id) ? `status is ${found.get(id)}, not QUARANTINED` : 'no such inbox row' }));
}

function candidateView(r: ReplayCandidate) {
  return {
    inboxId: r.inbox_id,
    consumer: r.consumer_name,
    eventId: r.event_id,
    eventType: r.event_type,
    aggregate: `${r.aggregate_type}/${r.aggregate_id}${r.aggregate_version !== null ? `@${r.aggregate_version}` : ''}`,
    errorCode: r.error_code,
    attempts: r.attempt_count,
    quarantinedAt: r.quarantined_at,
  };
}

function describeSelection(selection: ReplaySelection): string {
  return 'inboxIds' in selection ? `${selection.inboxIds.length} inbox id(s)` : `filter ${JSON.stringify(selection)}`;
}

export async function replay(deps: OpsDeps, args: CommandArgs<'replay'>, inv: Invocation) {
  const selection = selectionOf(deps, args);
  if (args.dryRun) {
    const [matched, rows] = await Promise.all([
      countReplayable(deps.sql, selection),
      previewReplay(deps.sql, selection, args.limit),
    ]);
    const skipped = await skippedIds(deps, selection, rows);
    if (matched === 0) {
      throw new OpsError(OpsErrorCodes.NO_ROWS_MATCH, `no QUARANTINED rows match ${describeSelection(selection)}`, { skipped });
    }
    return { dryRun: true, matched, wouldReplay: rows.length, limit: args.limit, rows: rows.map(candidateView), skipped };
  }

  // Checked before the actor so that the most useful message comes first.
  if (args.reason === undefined) {
    throw new OpsError(OpsErrorCodes.REASON_REQUIRED, 'a replay needs a reason (it is recorded in the audit trail); or use dry-run');
  }
  const actor = actorOf(args, inv);
  const source = args.source ?? inv.source;
  const result = await replayQuarantined(deps.sql, { selection, limit: args.limit, actor, reason: args.reason, source });
  const skipped = await skippedIds(deps, selection, result.replayed);
  if (result.audit === null) {
    throw new OpsError(OpsErrorCodes.NO_ROWS_MATCH, `no QUARANTINED rows match ${describeSelection(selection)}`, { skipped });
  }
  // Only a filter can leave more behind; ids beyond the limit are refused by the schema.
  const remaining = 'inboxIds' in selection ? 0 : await countReplayable(deps.sql, selection);
  deps.logger?.info('ops_replay', {
    auditId: result.audit.audit_id,
    actor,
    source,
    consumers: result.audit.consumer_names,
    replayed: result.replayed.length,
    remaining,
  });
  return {
    dryRun: false,
    replayed: result.replayed.length,
    remaining,
    auditId: result.audit.audit_id,
    rows: result.replayed.map(candidateView),
    skipped,
  };
}

// ---------------------------------------------------------------------------------------
// poison

export async function poisonList(deps: OpsDeps, args: CommandArgs<'poison-list'>) {
  const page = await listPoison(deps.sql, {
    consumerName: optionalConsumer(deps, args.consumer),
    includeResolved: args.includeResolved,
    after: decodeCursor(args.cursor),
    limit: args.limit,
  });
  return { rows: page.rows, nextCursor: encodeCursor(page.next) };
}

export async function poisonShow(deps: OpsDeps, args: CommandArgs<'poison-show'>) {
  const row = await getPoison(deps.sql, args.id);
  if (row === undefined) throw new OpsError(OpsErrorCodes.NOT_FOUND, `no poison row ${args.id}`);
  return { row };
}

/** The Kafka record a poison row was made from, as the event-source mapping delivered it. */
export function recordFromPoison(row: PoisonRow): KafkaRecord {
  const bytesOf = (text: string, encoding: 'utf8' | 'base64') =>
    encoding === 'base64' ? Buffer.from(text, 'base64') : Buffer.from(text, 'utf8');
  const headers: Array<Record<string, number[]>> = [];
  if (typeof row.headers === 'object' && row.headers !== null) {
    for (const [name, stored] of Object.entries(row.headers as Record<string, unknown>)) {
      for (const v of Array.isArray(stored) ? stored : [stored]) {
        const bytes =
          typeof v === 'string'
            ? Buffer.from(v, 'utf8')
            : typeof v === 'object' && v !== null && typeof (v as { base64?: unknown }).base64 === 'string'
              ? Buffer.from((v as { base64: string }).base64, 'base64')
              : Buffer.alloc(0);
        headers.push({ [name]: [...bytes] });
      }
    }
  }
  return {
    topic: row.topic_name,
    partition: row.partition_no,
    offset: row.offset_no,
    ...(row.record_timestamp !== null ? { timestamp: row.record_timestamp.getTime() } : {}),
    key: row.record_key === null ? null : bytesOf(row.record_key, row.record_key_encoding).toString('base64'),
    // INVALID_BASE64 rows keep what arrived, which was not base64: hand it back as it came.
    value:
      row.raw_value === null || row.raw_encoding === 'none'
        ? null
        : row.raw_encoding === 'base64'
          ? row.raw_value
          : Buffer.from(row.raw_value, 'utf8').toString('base64'),
    headers,
  };
}

/**
 * Re-parse a poison row with today's decoder and envelope schemas (the ingest function's
 * own, functions/ingest/decode.ts). Valid now: store it as an inbox row (idempotently: an
 * event id already in the inbox is linked, not duplicated) and mark the poison row
 * resolved, in one transaction. Still invalid: say why, change nothing.
 *
 * The row is stored RECEIVED, for the consumer's worker, whatever the consumer's mode: the
 * record's own ingest invocation is long gone, and the worker is the path every retry of
 * an inline consumer takes too.
 */
export async function poisonReingest(deps: OpsDeps, args: CommandArgs<'poison-reingest'>, inv: Invocation) {
  const actor = args.dryRun ? (args.actor ?? inv.defaultActor ?? 'dry-run') : actorOf(args, inv);
  return deps.sql.begin(async (tx) => {
    const row = await getPoison(tx, args.id, !args.dryRun);
    if (row === undefined) throw new OpsError(OpsErrorCodes.NOT_FOUND, `no poison row ${args.id}`);
    if (row.resolved_at !== null) {
      throw new OpsError(
        OpsErrorCodes.ALREADY_RESOLVED,
        `poison row ${row.poison_id} was resolved by ${row.resolved_by ?? '?'} into inbox row ${row.resolved_inbox_id ?? '?'}`,
        { resolvedInboxId: row.resolved_inbox_id, resolvedBy: row.resolved_by, resolvedAt: row.resolved_at },
      );
    }
    const consumer = knownConsumer(deps, row.consumer_name);
    const decoded = decodeRecord(recordFromPoison(row), consumer, { maxPayloadBytes: deps.config.maxPayloadBytes });
    if (decoded.kind === 'poison') {
      throw new OpsError(
        OpsErrorCodes.STILL_INVALID,
        `still invalid with today's schemas: ${decoded.row.errorCode}: ${decoded.row.errorMessage}`,
        { errorCode: decoded.row.errorCode, errorMessage: decoded.row.errorMessage },
      );
    }
    const event = { eventId: decoded.row.eventId, eventType: decoded.row.eventType, eventVersion: decoded.row.eventVersion };
    if (args.dryRun) return { dryRun: true, valid: true, poisonId: row.poison_id, consumer: consumer.name, ...event };

    const [inserted] = await insertInboxBatch(tx, consumer.name, [decoded.row]);
    // Not inserted: the event id is already in the inbox (a later, valid redelivery of the
    // same event); the poison row is resolved by that row.
    const inboxId =
      inserted?.inbox_id ??
      (
        await tx<{ inbox_id: string }[]>`
          select inbox_id from integration.consumer_inbox
          where consumer_name = ${consumer.name} and event_id = ${decoded.row.eventId}`
      )[0]?.inbox_id;
    if (inboxId === undefined) throw new Error('inbox row vanished between insert and lookup');
    const resolved = await resolvePoison(tx, { poisonId: row.poison_id, inboxId, resolvedBy: actor });
    if (resolved === undefined) throw new Error(`poison row ${row.poison_id} was resolved concurrently`);
    deps.logger?.info('ops_poison_reingested', {
      poisonId: row.poison_id,
      consumer: consumer.name,
      inboxId,
      eventId: event.eventId,
      alreadyInInbox: inserted === undefined,
      actor,
    });
    return {
      dryRun: false,
      poisonId: row.poison_id,
      consumer: consumer.name,
      inboxId,
      alreadyInInbox: inserted === undefined,
      ...event,
    };
  });
}

// ---------------------------------------------------------------------------------------
// pause / resume

interface ScheduleRef {
  name: string;
  groupName: string | undefined;
}

function workerSchedule(deps: OpsDeps, consumerName: string): ScheduleRef {
  const consumer = knownConsumer(deps, consumerName);
  const name = deps.config.scheduler.workerSchedules[consumer.name];
  if (name === undefined) {
    const configured = Object.keys(deps.config.scheduler.workerSchedules);
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      `consumer "${consumer.name}" has no worker schedule in WORKER_SCHEDULES (configured: ${configured.join(', ') || 'none'})`,
    );
  }
  return { name, groupName: deps.config.scheduler.groupName };
}

/** Fields GetSchedule returns that UpdateSchedule does not take (read-only), plus the one we change. */
type NotCarried = 'Arn' | 'CreationDate' | 'LastModificationDate' | 'State' | '$metadata';
type Carried = Omit<GetScheduleCommandOutput, NotCarried>;
// A compile-time guard: should the SDK add a field to GetSchedule's output that
// UpdateSchedule does not accept, this line stops compiling until someone decides.
const everyCarriedFieldIsUpdatable: Exclude<keyof Carried, keyof UpdateScheduleCommandInput> extends never ? true : never = true;
void everyCarriedFieldIsUpdatable;

/**
 * UpdateSchedule replaces the whole schedule: an omitted field is reset, not kept. So the
 * input is everything GetSchedule returned (target, input, retry policy, DLQ, window,
 * timezone, dates, KMS key, description, action after completion…), with State changed.
 */
export function updateInputFrom(current: GetScheduleCommandOutput, state: 'ENABLED' | 'DISABLED'): UpdateScheduleCommandInput {
  const { Arn: _arn, CreationDate: _created, LastModificationDate: _modified, State: _state, $metadata: _meta, ...carried } =
    current;
  const { Name, ScheduleExpression, Target, FlexibleTimeWindow } = carried;
  if (Name === undefined || ScheduleExpression === undefined || Target === undefined || FlexibleTimeWindow === undefined) {
    throw new Error('GetSchedule returned a schedule without Name, ScheduleExpression, Target or FlexibleTimeWindow');
  }
  return { ...carried, Name, ScheduleExpression, Target, FlexibleTimeWindow, State: state };
}

async function setWorkerState(
  deps: OpsDeps,
  args: CommandArgs<'pause'>,
  inv: Invocation,
  state: 'ENABLED' | 'DISABLED',
) {
  const ref = workerSchedule(deps, args.consumer);
  const actor = actorOf(args, inv);
  let current: GetScheduleCommandOutput;
  try {
    current = await deps.scheduler.send(
      new GetScheduleCommand({ Name: ref.name, ...(ref.groupName !== undefined ? { GroupName: ref.groupName } : {}) }),
    );
  } catch (error) {
    if (error instanceof ResourceNotFoundException) {
      throw new OpsError(OpsErrorCodes.NOT_FOUND, `schedule ${ref.groupName ?? 'default'}/${ref.name} does not exist`);
    }
    throw error;
  }
  const previous = current.State ?? 'ENABLED';
  const changed = previous !== state;
  // Already in the wanted state: no write, so a repeated pause cannot race a resume.
  if (changed) await deps.scheduler.send(new UpdateScheduleCommand(updateInputFrom(current, state)));
  deps.logger?.info(state === 'DISABLED' ? 'ops_pause' : 'ops_resume', {
    consumer: args.consumer,
    schedule: ref.name,
    previous,
    state,
    changed,
    actor,
    reason: args.reason,
  });
  return { consumer: args.consumer, schedule: ref.name, groupName: ref.groupName ?? 'default', previous, state, changed };
}

export async function pause(deps: OpsDeps, args: CommandArgs<'pause'>, inv: Invocation) {
  return setWorkerState(deps, args, inv, 'DISABLED');
}

export async function resume(deps: OpsDeps, args: CommandArgs<'resume'>, inv: Invocation) {
  return setWorkerState(deps, args, inv, 'ENABLED');
}

// ---------------------------------------------------------------------------------------
// schedule-replay

/** `at(yyyy-mm-ddThh:mm:ss)` in UTC, the one-time expression EventBridge Scheduler takes. */
export function atExpression(when: Date): string {
  return `at(${when.toISOString().slice(0, 19)})`;
}

/**
 * Create a one-time schedule that invokes the ops function with a replay at `at`. It is
 * deleted after it runs (ActionAfterCompletion DELETE); the replay itself writes the audit
 * row when it runs, with source 'schedule'. Retries are off: an audited operator action
 * runs once, and a failure shows in the ops function's errors rather than repeating.
 */
export async function scheduleReplay(deps: OpsDeps, args: CommandArgs<'schedule-replay'>, inv: Invocation) {
  const { schedulerRoleArn, groupName } = deps.config.scheduler;
  // In AWS the ops function targets itself (its ARN comes from the invocation context: an
  // ARN in its own environment would be a circular reference in the template); the CLI
  // needs OPS_FUNCTION_ARN.
  const opsFunctionArn = deps.config.scheduler.opsFunctionArn ?? inv.invokedFunctionArn;
  if (opsFunctionArn === undefined || schedulerRoleArn === undefined) {
    throw new OpsError(
      OpsErrorCodes.NOT_CONFIGURED,
      'schedule-replay needs SCHEDULER_ROLE_ARN, and OPS_FUNCTION_ARN when not run by the ops function',
    );
  }
  const selection = selectionOf(deps, args);
  if (args.reason === undefined) {
    throw new OpsError(OpsErrorCodes.REASON_REQUIRED, 'a scheduled replay needs a reason (it is recorded in the audit trail)');
  }
  const actor = actorOf(args, inv);
  const when = new Date(args.at);
  const now = (deps.now ?? (() => new Date()))();
  if (when.getTime() <= now.getTime()) {
    throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, `at: ${when.toISOString()} is not in the future`);
  }
  const input = {
    command: 'replay',
    source: 'schedule',
    actor,
    reason: args.reason,
    limit: args.limit,
    ...(args.ids !== undefined
      ? { ids: args.ids }
      : {
          consumer: args.consumer,
          ...(args.errorCode !== undefined ? { errorCode: args.errorCode } : {}),
          ...(args.eventType !== undefined ? { eventType: args.eventType } : {}),
          ...(args.from !== undefined ? { from: args.from } : {}),
          ...(args.to !== undefined ? { to: args.to } : {}),
        }),
  };
  // The schedule fires once, unattended: make sure now that the replay will accept its input.
  const { command: _replay, ...replayArgs } = input;
  schemas.replay.parse(replayArgs);
  const stamp = when.toISOString().replace(/[-:]/g, '').slice(0, 15);
  const subject = 'inboxIds' in selection ? 'ids' : selection.consumerName.replace(/[^0-9a-zA-Z-_.]/g, '-');
  const name = args.name ?? `${REPLAY_SCHEDULE_PREFIX}${subject}-${stamp}-${Math.random().toString(36).slice(2, 8)}`.slice(0, 64);
  const command: CreateScheduleCommandInput = {
    Name: name,
    ...(groupName !== undefined ? { GroupName: groupName } : {}),
    ScheduleExpression: atExpression(when),
    ScheduleExpressionTimezone: 'UTC',
    Description: `ops replay by ${actor}: ${args.reason}`.slice(0, 512),
    State: 'ENABLED',
    FlexibleTimeWindow: { Mode: 'OFF' },
    ActionAfterCompletion: 'DELETE',
    Target: {
      Arn: opsFunctionArn,
      RoleArn: schedulerRoleArn,
      Input: JSON.stringify(input),
      RetryPolicy: { MaximumRetryAttempts: 0 },
    },
  };
  const matchingNow = await countReplayable(deps.sql, selection);
  const out = await deps.scheduler.send(new CreateScheduleCommand(command));
  deps.logger?.info('ops_schedule_replay', { schedule: name, at: when.toISOString(), actor, matchingNow });
  return {
    schedule: name,
    groupName: groupName ?? 'default',
    scheduleArn: out.ScheduleArn ?? null,
    expression: command.ScheduleExpression,
    input,
    matchingNow,
  };
}
