/**
 * Every function works through a pooler that accepts nothing in the startup message but
 * user, database and application_name, as RDS Proxy does (test/helpers/startup-proxy.ts),
 * and still runs each statement under its role's timeouts (docs/design.md, "Connections").
 * The functions as they ship (bundled, each invocation in its own process, configured only
 * by its environment, with the pool the CDK app gives it), each as its own database role;
 * the migration function as the owner, on an empty database.
 */
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { POOL_MAX } from '../../../cdk/connection-budget';
import { CONSUMERS } from '../../../functions/consumers';
import { parseConfig } from '../../../functions/lib/config';
import {
  DatabaseRoles,
  ingestRoleOf,
  relayRoleOf,
  runtimeRoles,
  sessionKindOf,
  workerRoleOf,
  type DatabaseRole,
} from '../../../functions/lib/database-roles';
import { createSql } from '../../../functions/lib/db';
import { loadMigrations, MIGRATIONS_DIR } from '../../../functions/lib/migration-files';
import { SESSION_TIMEOUTS, type SessionKind } from '../../../functions/lib/session-settings';
import { withDatabase } from '../../../tools/database-url';
import { caseAccepted } from '../../../tools/case-events';
import { functionUrlRequest, OPERATOR_ROLE, OPERATOR_SESSION } from '../../../tools/function-url-events';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { useTestDatabase } from '../../helpers/db';
import { ACCEPTED_STARTUP_PARAMETERS, startStartupProxy, type StartupProxy } from '../../helpers/startup-proxy';
import { bundledFunctions, relayWithoutBrokers, type Bundles } from '../../helpers/bundles';

const db = await useTestDatabase();
const adminUrl = inject('dbAdminUrl');
let bundles: Bundles;
let proxy: StartupProxy;
/** An empty database the migration function migrates through the proxy. */
const fresh = `${db.name}_fresh`;

beforeAll(async () => {
  const u = new URL(db.url);
  [bundles, proxy] = await Promise.all([
    bundledFunctions('startup-parameters'),
    startStartupProxy({ host: u.hostname, port: Number(u.port) }),
  ]);
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${fresh}"`);
  await admin.end();
}, 120_000);

afterAll(async () => {
  await proxy.close();
  await bundles.remove();
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists "${fresh}" with (force)`);
  await admin.end();
});

/** A function's environment as deployed: its URL through the proxy, its pool. */
function deployed(role: DatabaseRole | 'owner', kind: SessionKind, env: Record<string, string> = {}): Record<string, string> {
  const url = role === 'owner' ? withDatabase(db.url, fresh) : db.urlAs(role);
  return { DATABASE_URL: proxy.urlThrough(url), DB_POOL_MAX: String(POOL_MAX[kind]), ...env };
}

describe('a proxy that accepts only user, database and application_name at connect', () => {
  it('refuses a client that sends a session setting or an encoding at connect (the startup message functions sent before)', async () => {
    const url = proxy.urlThrough(db.urlAs(DatabaseRoles.reaper));
    const settings = postgres(url, { max: 1, onnotice: () => {}, connection: { statement_timeout: 30_000 } });
    const plain = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await expect(settings`select 1`).rejects.toMatchObject({ code: '0A000' });
      // postgres.js sends client_encoding unless told otherwise.
      await expect(plain`select 1`).rejects.toMatchObject({ code: '0A000' });
    } finally {
      await Promise.all([settings.end({ timeout: 1 }), plain.end({ timeout: 1 })]);
    }
    expect(proxy.refused.map((p) => Object.keys(p).filter((k) => !(ACCEPTED_STARTUP_PARAMETERS as readonly string[]).includes(k)))).toEqual(
      [['client_encoding', 'statement_timeout'], ['client_encoding']],
    );
    proxy.refused.length = 0;
  });

  it('lets the migration function migrate an empty database through it, as the owner', async () => {
    const files = (await loadMigrations(MIGRATIONS_DIR)).map((m) => m.name);

    const result = await bundles.invoke('migrate', {}, deployed('owner', 'migrate'));

    expect(result).toEqual({ applied: files, alreadyApplied: 0, newer: [] });
  });

  it('lets ingest, worker, relay, reaper and ops do their work through it, each as its own role', async () => {
    const topic = 'regulatory.case.events.v1';
    const sla = { CONSUMER_NAME: 'case-sla' };
    const batch = mskEvent([mskRecord({ topic, partition: 4, offset: 9, value: caseAccepted('case_p1', 'evt_p1') })]);

    const ingest = await bundles.invoke('ingest', batch, deployed(ingestRoleOf({ name: 'case-sla' }), 'ingest', sla));
    const worker = await bundles.invoke(
      'worker',
      { source: 'schedule' },
      deployed(workerRoleOf({ name: 'case-sla' }), 'worker', { ...sla, WORKER_IDLE_MS: '0' }),
    );
    const relay = await bundles.invoke(
      'relay',
      { source: 'schedule' },
      deployed(relayRoleOf({ name: 'case-sla' }), 'relay', { ...sla, ...(await relayWithoutBrokers()) }),
    );
    const reaper = await bundles.invoke('reaper', { source: 'schedule' }, deployed(DatabaseRoles.reaper, 'reaper'));
    // An operator, through the ops function's URL.
    const answer = (await bundles.invoke(
      'ops',
      functionUrlRequest({ command: 'event', eventId: 'evt_p1' }, OPERATOR_SESSION),
      deployed(DatabaseRoles.ops, 'ops', { OPERATOR_PRINCIPALS: JSON.stringify([OPERATOR_ROLE]) }),
    )) as { body: string };
    const ops = JSON.parse(answer.body) as { result: { events: unknown[] } };

    expect(ingest).toEqual({ batchItemFailures: [] });
    expect(worker).toMatchObject({ claimed: 1, processed: 1 });
    // No broker to publish to: claimed, refused, kept for the next run.
    expect(relay).toMatchObject({ claimed: 1, published: 0, refused: 1 });
    expect(reaper).toEqual({ released: 0, quarantined: 0, purged: 0 });
    expect(ops.result.events).toEqual([expect.objectContaining({ consumer: 'case-sla', status: 'PROCESSED' })]);
    expect(await db.sql`select case_id from case_core.sla_obligation where case_id = 'case_p1'`).toHaveLength(1);

    // Each function logged in as its own role, and asked for nothing else.
    expect(proxy.refused).toEqual([]);
    const users = new Set(proxy.accepted.map((p) => p.user));
    for (const role of ['inbox_ingest_case_sla', 'inbox_worker_case_sla', 'inbox_relay_case_sla', 'inbox_reaper', 'inbox_ops']) {
      expect(users, role).toContain(role);
    }
    for (const p of proxy.accepted) expect(Object.keys(p).sort()).toEqual([...ACCEPTED_STARTUP_PARAMETERS].sort());
  });

  it('leaves every role a function logs in as, and the migration role, with its non-zero timeouts', async () => {
    const sessions: Record<string, Record<string, string>> = {};
    const roles: [string, string, SessionKind][] = [
      ...runtimeRoles(CONSUMERS).map((r): [string, string, SessionKind] => [r, db.urlAs(r), sessionKindOf(r)]),
      ['owner', withDatabase(db.url, fresh), 'migrate'],
    ];
    for (const [name, url, kind] of roles) {
      const sql = await createSql(parseConfig({ DATABASE_URL: proxy.urlThrough(url), DB_POOL_MAX: '1' }).database);
      try {
        const [row] = await sql<Record<string, string>[]>`
          select current_setting('statement_timeout', false) as statement,
                 current_setting('idle_in_transaction_session_timeout', false) as idle_in_transaction,
                 current_setting('idle_session_timeout', false) as idle_session,
                 current_setting('client_encoding', false) as encoding`;
        sessions[name] = row!;
      } finally {
        await sql.end({ timeout: 1 });
      }
      const t = SESSION_TIMEOUTS[kind];
      // As PostgreSQL shows them: whole seconds or minutes.
      const shown = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000}min` : `${ms / 1000}s`);
      expect(sessions[name], name).toEqual({
        statement: shown(t.statementMs),
        idle_in_transaction: shown(t.idleInTransactionMs),
        idle_session: shown(t.idleSessionMs),
        encoding: 'UTF8',
      });
    }
    expect(Object.keys(sessions)).toHaveLength(runtimeRoles(CONSUMERS).length + 1);
    expect(Object.values(sessions).every((s) => !['0', '0s'].includes(s.statement!) && !['0', '0s'].includes(s.idle_session!))).toBe(true);
  });
});
