/**
 * A function's client after a freeze (functions/lib/db.ts, db-connections.ts; docs/design.md
 * "Connections"), against the real server through a proxy that can play dead: a connection
 * whose peer went away silently is given up within the client's bound or at the invocation's
 * deadline, not at the function's timeout; work that failed on it before the server answered
 * anything runs once more on a new connection, and work that had been answered does not; a
 * connection idle past the client's idle timeout is closed before anything is sent on it.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../../functions/lib/config';
import { beginInvocation, connectionsOf, createSql, retryOnDeadConnection, type Sql } from '../../../functions/lib/db';
import { workerRoleOf } from '../../../functions/lib/database-roles';
import { isConnectionError } from '../../../functions/lib/errors';
import { useTestDatabase } from '../../helpers/db';
import { startStartupProxy, type StartupProxy } from '../../helpers/startup-proxy';

const db = await useTestDatabase();
const ROLE = workerRoleOf({ name: 'case-projection' });

let proxy: StartupProxy;
let sql: Sql;

/** Added to the connections' clock: the time the container spent frozen. */
let frozenMs = 0;

/** The worker's client as its handler builds it, through the proxy, with a short bound. */
async function client(env: Record<string, string> = {}): Promise<Sql> {
  const u = new URL(db.urlAs(ROLE));
  proxy = await startStartupProxy({ host: u.hostname, port: Number(u.port) });
  const config = parseConfig({ DATABASE_URL: proxy.urlThrough(db.urlAs(ROLE)), DB_POOL_MAX: '1', DB_QUERY_TIMEOUT_MS: '400', ...env });
  sql = await createSql(config.database, { clock: () => performance.now() + frozenMs });
  return sql;
}

afterEach(async () => {
  await sql.end({ timeout: 1 });
  await proxy.close();
});

beforeEach(() => {
  frozenMs = 0;
});

const invocation = (remainingMs = 60_000) => ({ getRemainingTimeInMillis: () => remainingMs });

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('a connection whose peer went away while the container was frozen', () => {
  it('fails its statement within the bound, as a connection error, instead of waiting out the function', async () => {
    const sql = await client();
    await sql`select 1`;
    proxy.blackHole();

    const error = await failureOf(sql`select 2`);

    expect(isConnectionError(error)).toBe(true);
    expect(connectionsOf(sql)!.unanswered).toBe(1);
  });

  it('fails its statement at the invocation deadline when that comes before the bound', async () => {
    const sql = await client({ DB_QUERY_TIMEOUT_MS: '600000' });
    await sql`select 1`;
    proxy.blackHole();
    // 1.5 s left: the client keeps one second to return, so the statement may wait half a second.
    await beginInvocation(sql, invocation(1_500));

    const error = await failureOf(sql`select 2`);

    expect(isConnectionError(error)).toBe(true);
    expect(connectionsOf(sql)!.unanswered).toBe(1);
  });

  it('runs the work once more on a new connection when nothing of it was answered, and it succeeds', async () => {
    const sql = await client();
    await sql`select 1`;
    proxy.blackHole();
    const work = vi.fn(async () => (await sql<{ n: number }[]>`select 41 + 1 as n`)[0]!.n);
    const retried = vi.fn();

    const n = await retryOnDeadConnection(sql, work, retried);

    expect(n).toBe(42);
    expect(work).toHaveBeenCalledTimes(2);
    expect(retried).toHaveBeenCalledWith(expect.objectContaining({ code: 'CONNECTION_CLOSED' }));
    // The dead connection, then a new one.
    expect(proxy.accepted).toHaveLength(2);
  });

  it('does not run work again that the server had answered part of: the error is the caller’s', async () => {
    const sql = await client();
    await sql`select 1`;
    await db.sql`create table if not exists public.connection_probe (n int)`;
    await db.sql`grant insert, select on public.connection_probe to ${db.sql(ROLE)}`;
    await db.sql`grant usage on schema public to ${db.sql(ROLE)}`;
    const work = vi.fn(async () => {
      await sql`insert into public.connection_probe values (1)`;
      proxy.blackHole();
      await sql`insert into public.connection_probe values (2)`;
    });

    const error = await failureOf(retryOnDeadConnection(sql, work));

    expect(isConnectionError(error)).toBe(true);
    expect(work).toHaveBeenCalledTimes(1);
    expect(await db.sql`select n from public.connection_probe`).toEqual([{ n: 1 }]);
  });

  it('is closed at the next invocation’s start, before anything is sent on it, when it idled past the client’s idle timeout', async () => {
    const sql = await client({ DB_IDLE_TIMEOUT_SECONDS: '120' });
    await sql`select 1`;
    proxy.blackHole();
    // Frozen for two minutes and a second: no timer of the container ran meanwhile.
    frozenMs = 121_000;

    await beginInvocation(sql, invocation());
    const work = vi.fn(async () => (await sql<{ n: number }[]>`select 7 as n`)[0]!.n);
    const n = await retryOnDeadConnection(sql, work);

    expect(n).toBe(7);
    expect(work).toHaveBeenCalledTimes(1);
    expect(connectionsOf(sql)!).toMatchObject({ stale: 1, unanswered: 0 });
    expect(proxy.accepted).toHaveLength(2);
  });

  it('keeps a connection used within its idle timeout: no reconnect without a reason', async () => {
    const sql = await client();
    await sql`select 1`;

    await beginInvocation(sql, invocation());
    await sql`select 2`;
    await beginInvocation(sql, invocation());
    await sql`select 3`;

    expect(proxy.accepted).toHaveLength(1);
    expect(connectionsOf(sql)!).toMatchObject({ stale: 0, unanswered: 0 });
  });
});
