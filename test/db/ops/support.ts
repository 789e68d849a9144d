/** Shared arrangement for the ops commands' database tests. */
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { SchedulerClient } from '@aws-sdk/client-scheduler';
import { localManifest } from '../../../functions/consumers';
import type { Invocation, OpsDeps } from '../../../functions/ops/command';
import { OpsError, type OpsErrorCode } from '../../../functions/ops/errors';
import { runCommand } from '../../../functions/ops/run';
import type { Config } from '../../../functions/lib/config';
import type { Sql } from '../../../functions/lib/db';
import { expect } from 'vitest';
import { insertInboxRow, type InboxRowSpec } from '../../helpers/factories';

export const cli: Invocation = { source: 'cli', defaultActor: 'alice' };

export const schedulerConfig = (overrides: Partial<Config['scheduler']> = {}): OpsDeps['config'] => ({
  scheduler: {
    groupName: 'inbox-schedules',
    workerSchedules: { 'case-projection': 'inbox-worker-case-projection', 'case-sla': 'inbox-worker-case-sla' },
    opsFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:inbox-ops',
    schedulerRoleArn: 'arn:aws:iam::123456789012:role/inbox-scheduler',
    ...overrides,
  },
  ingestMappings: {},
  workerFunctions: {},
  maxPayloadBytes: 256 * 1024,
});

/** A scheduler that must not be called: database commands never talk to AWS. */
const noScheduler: Pick<SchedulerClient, 'send'> = {
  send: (() => Promise.reject(new Error('scheduler must not be called'))) as SchedulerClient['send'],
};

/** A Lambda client that must not be called: only pause/resume --ingest use one. */
const noLambda: Pick<LambdaClient, 'send'> = {
  send: (() => Promise.reject(new Error('lambda must not be called'))) as LambdaClient['send'],
};

export function opsDeps(sql: Sql, overrides: Partial<OpsDeps> = {}): OpsDeps {
  return { sql, scheduler: noScheduler, lambda: noLambda, config: schedulerConfig(), consumers: localManifest(), ...overrides };
}

export function run<T = any>(deps: OpsDeps, input: Record<string, unknown>, inv: Invocation = cli): Promise<T> {
  return runCommand(deps, input, inv) as Promise<T>;
}

/** The OpsError a command fails with; fails the test when it succeeds or throws something else. */
export async function opsError(promise: Promise<unknown>, code: OpsErrorCode): Promise<OpsError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OpsError);
  expect((error as OpsError).code).toBe(code);
  return error as OpsError;
}

/** Every column of every inbox row, for before/after comparisons. */
export function allInboxRows(sql: Sql) {
  return sql`select * from integration.consumer_inbox order by inbox_id`;
}

/** An ISO-8601 instant (whole seconds, UTC) `minutes` before the database's now(). */
export async function isoMinutesAgo(sql: Sql, minutes: number): Promise<string> {
  const [row] = await sql<{ at: string }[]>`
    select to_char((now() - make_interval(mins => ${minutes})) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as at`;
  return row!.at;
}

/** A QUARANTINED row (PAYLOAD_INVALID unless said otherwise). */
export function quarantinedRow(sql: Sql, spec: InboxRowSpec = {}) {
  return insertInboxRow(sql, { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', attemptCount: 1, ...spec });
}

/** Every column of one inbox row. */
export async function inboxRowOf(sql: Sql, inboxId: string) {
  const [row] = await sql`select * from integration.consumer_inbox where inbox_id = ${inboxId}`;
  return row!;
}

/** The operator audit, oldest first. */
export function auditRows(sql: Sql) {
  return sql`select * from integration.operator_audit order by created_at`;
}
