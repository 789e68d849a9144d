/** Shared arrangement for the worker's database tests. */
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import { Logger } from '@aws-lambda-powertools/logger';
import type { AwsClientStub } from 'aws-sdk-client-mock';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { ConsumerDeclaration, EventHandler, RetryPolicy } from '../../../functions/framework/types';
import type { Sql } from '../../../functions/lib/db';
import { newOwnerId, runWorker, type WorkerDependencies, type WorkerResult } from '../../../functions/worker/run-worker';
import type { InvitedEvent } from '../../../functions/wings/wake-ups/wake-up';

export function quietObservability(): { logger: Logger; metrics: Metrics } {
  return {
    logger: new Logger({ serviceName: 'worker-test', logLevel: 'SILENT' }),
    metrics: new Metrics({ namespace: 'WorkerTest', serviceName: 'worker-test' }),
  };
}

export const workerConfig = (overrides: Partial<WorkerDependencies['config']['worker']> = {}) => ({
  worker: { batchSize: 100, safetyMarginMs: 1_000, leaseSeconds: 300, ...overrides },
});

/** Plenty of time left: the loop ends only when nothing is due. */
export const plentyOfTime = () => 600_000;

/** The same consumer with a changed retry policy and/or extra handlers. */
export function variant(
  base: ConsumerDeclaration,
  changes: { retry?: Partial<RetryPolicy>; handlers?: Record<string, Record<number, EventHandler<any>>>; name?: string } = {},
): ConsumerDeclaration {
  return {
    ...base,
    name: changes.name ?? base.name,
    retry: { ...base.retry, ...changes.retry },
    handlers: { ...base.handlers, ...changes.handlers },
  };
}

export function work(
  sql: Sql,
  consumer: ConsumerDeclaration,
  extra: Partial<Omit<WorkerDependencies, 'sql' | 'consumer'>> = {},
): Promise<WorkerResult> {
  return runWorker({
    sql,
    consumer,
    config: workerConfig(),
    ...quietObservability(),
    owner: newOwnerId('test'),
    remainingMs: plentyOfTime,
    random: () => 0,
    ...extra,
  });
}

export interface InboxState {
  event_id: string;
  status: string;
  attempt_count: number;
  error_code: string | null;
  next_attempt_at: Date | null;
  processed_at: Date | null;
  quarantined_at: Date | null;
  locked_by: string | null;
  lease_expires_at: Date | null;
  updated_at: Date;
  error_detail: Record<string, unknown> | null;
  /** next_attempt_at − updated_at in seconds (both the database's now() of the completion). */
  delay_seconds: number | null;
}

export async function inboxRow(sql: Sql, inboxId: string): Promise<InboxState> {
  const [row] = await sql<InboxState[]>`
    select event_id, status, attempt_count, error_code, next_attempt_at, processed_at, quarantined_at,
           locked_by, lease_expires_at, updated_at, error_detail,
           extract(epoch from next_attempt_at - updated_at)::float8 as delay_seconds
    from integration.consumer_inbox where inbox_id = ${inboxId}`;
  if (row === undefined) throw new Error(`no inbox row ${inboxId}`);
  return row;
}

/** The single row a query returns. */
export async function one<T>(query: PromiseLike<readonly T[]>): Promise<T> {
  const [row] = await query;
  if (row === undefined) throw new Error('query returned no row');
  return row;
}

export interface TriggerSpec {
  name: string;
  /** The table, schema-qualified. */
  on: string;
  /** e.g. 'after insert', 'before update'. */
  when: string;
  /** The plpgsql body between begin and end. */
  body: string;
  /** A constraint trigger checked at commit. */
  deferred?: boolean;
}

/** Run `fn` with a row trigger in place (a database fault injected where the test chooses). */
export async function withTrigger<T>(sql: Sql, spec: TriggerSpec, fn: () => Promise<T>): Promise<T> {
  const { name, on, when, body, deferred = false } = spec;
  await sql.unsafe(`
    create function public.${name}() returns trigger language plpgsql as $$ begin ${body} end $$;
    create ${deferred ? 'constraint ' : ''}trigger ${name} ${when} on ${on}
      ${deferred ? 'deferrable initially deferred ' : ''}for each row execute function public.${name}();`);
  try {
    return await fn();
  } finally {
    await sql.unsafe(`drop trigger ${name} on ${on}; drop function public.${name}()`);
  }
}

/**
 * How many `event` statements ran on `table` (schema-qualified) while `fn` ran: a statement
 * trigger fires once per statement, whatever it changed.
 */
export async function countingStatements(
  sql: Sql,
  on: { table: string; event: 'insert' | 'update' },
  fn: () => Promise<unknown>,
): Promise<number> {
  await sql.unsafe(`
    create sequence public.counted_statements;
    create function public.count_statement() returns trigger language plpgsql security definer as $$
      begin perform nextval('public.counted_statements'); return null; end $$;
    create trigger count_statement after ${on.event} on ${on.table}
      for each statement execute function public.count_statement();`);
  try {
    await fn();
    const [row] = await sql<{ n: number }[]>`
      select last_value::int - case when is_called then 0 else 1 end as n from public.counted_statements`;
    return row!.n;
  } finally {
    await sql.unsafe(`
      drop trigger count_statement on ${on.table};
      drop function public.count_statement();
      drop sequence public.counted_statements;`);
  }
}

/** Each InvokeCommand a mocked Lambda client was sent: its input, the payload parsed. */
export function invocationsOf(mock: AwsClientStub<LambdaClient>) {
  return mock.commandCalls(InvokeCommand).map((c) => {
    const { Payload, ...input } = c.args[0].input;
    return { ...input, Payload: JSON.parse(Buffer.from(Payload as Uint8Array).toString('utf8')) as InvitedEvent };
  });
}

/**
 * A test consumer's own table, `public.<name>` (seq, aggregate_id, event_id), in which its
 * worker role records what its handler applied: the role may insert into it, as its
 * declaration's `tables` would grant.
 */
export async function createAppliedTable(sql: Sql, name: string, role: string): Promise<void> {
  const table = sql(`public.${name}`);
  await sql`create table ${table} (seq bigserial primary key, aggregate_id text not null, event_id text not null)`;
  await sql`grant usage on schema public to ${sql(role)}`;
  await sql`grant insert on ${table} to ${sql(role)}`;
  await sql`grant usage on sequence ${sql(`public.${name}_seq_seq`)} to ${sql(role)}`;
}
