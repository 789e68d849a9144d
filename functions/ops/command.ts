/**
 * What every ops command is made of, and what it is given. A command is one file in
 * ./commands/: its argument schema, the function that runs it, its help lines and how the
 * CLI prints its result, side by side (the way functions/inbox/ keeps one file per
 * database operation). The ops Lambda and the CLI run the same commands (./run.ts).
 */
import { userInfo } from 'node:os';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { SchedulerClient } from '@aws-sdk/client-scheduler';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SSMClient } from '@aws-sdk/client-ssm';
import type { z } from 'zod';
import { recordOperatorAction, type OperatorActionEntry } from './queries/operator-audit';
import type { ConsumerManifest, ConsumerManifestEntry } from '../framework/manifest';
import type { Config } from '../lib/config';
import type { Sql } from '../lib/db';
import { OpsError, OpsErrorCodes } from './errors';

/** The little a command logs: identifiers and counts, never payloads. */
export interface OpsLogger {
  info(message: string, extra: Record<string, unknown>): void;
  error(message: string, extra: Record<string, unknown>): void;
}

export interface OpsDeps {
  sql: Sql;
  /** Only the schedule commands use it. */
  scheduler: Pick<SchedulerClient, 'send'>;
  /** pause/resume --ingest (event-source mappings), resume (wakes a worker), reingest-failed (invokes an ingest function). */
  lambda: Pick<LambdaClient, 'send'>;
  /** pause/resume and reingest-failed read the consumer directory with it (./consumer-directory.ts). */
  ssm?: Pick<SSMClient, 'send'>;
  /** Only reingest-failed uses it: the on-failure bucket. */
  s3?: Pick<S3Client, 'send'>;
  config: Pick<Config, 'scheduler' | 'maxPayloadBytes' | 'consumerDirectory' | 'failedRecordsBucket'>;
  /** The declared consumers: the manifest (functions/framework/manifest.ts), data only. */
  consumers: ConsumerManifest;
  /** The wall clock, for validating schedule times (database work uses now() in SQL). */
  now?: () => Date;
  logger?: OpsLogger;
}

/**
 * How the command was invoked: the CLI knows the OS user (and the database its login role);
 * the Lambda knows the caller's IAM identity from its function URL. The source is the
 * caller's, never the event's: only run-scheduled-replay records 'schedule', and only for a
 * replay the database holds.
 */
export interface Invocation {
  source: 'cli' | 'lambda';
  defaultActor?: string | undefined;
  /** The ops Lambda's own ARN (from its context): the target of a scheduled replay. */
  invokedFunctionArn?: string | undefined;
  /** The Lambda request id (from its context), recorded with every audit row it writes. */
  requestId?: string | undefined;
}

export interface OpsCommand<S extends z.ZodType, R> {
  /** The command's lines in `--help`: its synopsis, then what it does. */
  usage: string;
  /** Its arguments; objects are strict, so a misspelt argument is refused, never ignored. */
  schema: S;
  run(deps: OpsDeps, args: z.output<S>, inv: Invocation): Promise<R>;
  /** The CLI's human-readable rendering of the result (`--json` prints the result itself). */
  format(result: R): string;
  /** The CLI takes this argument as a bare word too (`poison show <id>`). */
  positional?: 'id';
  /**
   * How the command changes state, if it does: with `dryRun: false`, with `apply: true`, or
   * always. The function URL runs such a command as a dry run unless the request says
   * `apply` (./function-url.ts).
   */
  changes?: 'dry-run-flag' | 'apply-flag' | 'always';
}

/** Ties a command's run and format to its schema's output type. */
export function defineCommand<S extends z.ZodType, R>(command: OpsCommand<S, R>): OpsCommand<S, R> {
  return command;
}

export function consumersOf(deps: OpsDeps): ConsumerManifest {
  return deps.consumers;
}

export function knownConsumer(deps: OpsDeps, name: string): ConsumerManifestEntry {
  const consumer = consumersOf(deps).find((c) => c.name === name);
  if (consumer === undefined) {
    const known = consumersOf(deps).map((c) => c.name);
    throw new OpsError(OpsErrorCodes.UNKNOWN_CONSUMER, `unknown consumer "${name}" (known: ${known.join(', ')})`, { known });
  }
  return consumer;
}

export function optionalConsumer(deps: OpsDeps, name: string | undefined): string | undefined {
  return name === undefined ? undefined : knownConsumer(deps, name).name;
}

export function actorOf(args: { actor?: string | undefined }, inv: Invocation): string {
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

/**
 * Write the audit row of an action already done on AWS (pause, resume, schedule-replay),
 * which no database transaction can include. If the database refuses the row, the action
 * still stands: the row goes to the log (`ops_audit_unwritten`) and the caller says so.
 */
export async function recordOrLog(deps: OpsDeps, entry: OperatorActionEntry): Promise<string | null> {
  try {
    return (await recordOperatorAction(deps.sql, entry)).audit_id;
  } catch (error) {
    deps.logger?.error('ops_audit_unwritten', { ...entry, error: error instanceof Error ? error.name : 'unknown' });
    return null;
  }
}
