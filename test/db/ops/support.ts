/** Shared arrangement for the ops commands' database tests. */
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { SchedulerClient } from '@aws-sdk/client-scheduler';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { localManifest } from '../../../functions/consumers';
import type { Invocation, OpsDeps } from '../../../functions/ops/command';
import type { ConsumerDirectoryEntry } from '../../../functions/ops/consumer-directory';
import { OpsError, type OpsErrorCode } from '../../../functions/ops/errors';
import { runCommand } from '../../../functions/ops/run';
import type { Config } from '../../../functions/lib/config';
import type { Sql } from '../../../functions/lib/db';
import { expect } from 'vitest';
import { insertInboxRow, type InboxRowSpec } from '../../helpers/factories';

export const cli: Invocation = { source: 'cli', defaultActor: 'alice' };

/** The consumer directory's SSM path in these tests. */
export const DIRECTORY = '/kafka-inbox/test/consumers/';

export const schedulerConfig = (overrides: Partial<Config['scheduler']> = {}): OpsDeps['config'] => ({
  scheduler: {
    groupName: 'inbox-schedules',
    opsFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:inbox-ops',
    schedulerRoleArn: 'arn:aws:iam::123456789012:role/inbox-scheduler',
    ...overrides,
  },
  consumerDirectory: DIRECTORY,
  maxPayloadBytes: 256 * 1024,
});

/** A consumer's directory entry as its stack writes it, with the names these tests use. */
export const directoryEntry = (consumer: string, overrides: Partial<ConsumerDirectoryEntry> = {}): ConsumerDirectoryEntry => ({
  workerSchedule: `inbox-worker-${consumer}`,
  workerFunction: `inbox-worker-fn-${consumer}`,
  ingestMappings: [],
  ...overrides,
});

/**
 * The consumer directory as ops reads it in AWS (GetParameter under DIRECTORY), its SSM
 * client mocked: the entries given, and ParameterNotFound for any other consumer.
 */
export function directoryOf(entries: Record<string, ConsumerDirectoryEntry>): SSMClient {
  const ssm = new SSMClient({ region: 'eu-west-1' });
  const mock = mockClient(ssm);
  mock.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} }));
  for (const [consumer, entry] of Object.entries(entries)) {
    mock.on(GetParameterCommand, { Name: `${DIRECTORY}${consumer}` }).resolves({ Parameter: { Value: JSON.stringify(entry) } });
  }
  return ssm;
}

/** A scheduler that must not be called: database commands never talk to AWS. */
const noScheduler: Pick<SchedulerClient, 'send'> = {
  send: (() => Promise.reject(new Error('scheduler must not be called'))) as SchedulerClient['send'],
};

/** A Lambda client that must not be called: only pause/resume --ingest use one. */
const noLambda: Pick<LambdaClient, 'send'> = {
  send: (() => Promise.reject(new Error('lambda must not be called'))) as LambdaClient['send'],
};

export function opsDeps(sql: Sql, overrides: Partial<OpsDeps> = {}): OpsDeps {
  const ssm = directoryOf({ 'case-projection': directoryEntry('case-projection'), 'case-sla': directoryEntry('case-sla') });
  return { sql, scheduler: noScheduler, lambda: noLambda, ssm, config: schedulerConfig(), consumers: localManifest(), ...overrides };
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
