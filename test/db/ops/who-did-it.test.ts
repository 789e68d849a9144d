/**
 * An operator with a name (migrations/0203_operator_audit_by_the_database.sql): every audit
 * row records the login role that wrote it; an operator's session cannot change inbox rows
 * (or poison, pauses, scheduled replays) without the audit row of the change in the same
 * transaction; an audit row cannot claim the ops function's sources from a person's role.
 * People use their own roles, `inbox_ops_<name>`, provisioned for the stage's operators.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import type { LambdaFunctionURLResult } from 'aws-lambda';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { provisionOperatorRoles } from '../../../functions/inbox/operator-roles';
import { DatabaseRoles, operatorRole } from '../../../functions/lib/database-roles';
import type { Sql } from '../../../functions/lib/db';
import { createOpsHandler, type OpsResponse } from '../../../functions/ops/run';
import { prepareRoleLogins } from '../../../tools/database-roles';
import { functionUrlRequest, OPERATOR_ROLE, OPERATOR_SESSION } from '../../../tools/function-url-events';
import { settledRoles, useTestDatabase } from '../../helpers/db';
import { insertInboxRows } from '../../helpers/factories';
import { cli, opsDeps, run } from './support';

const db = await useTestDatabase();
const quietOpsLogger = new Logger({ serviceName: 'ops-test', logLevel: 'SILENT' });
// Server-wide roles: named for this file so that no other test file provisions or retires it.
const OPERATOR = 'who_did_it_alice';
const alice = operatorRole(OPERATOR);

beforeAll(async () => {
  await provisionOperatorRoles(db.sql, [OPERATOR]);
  const admin = postgres(inject('dbAdminUrl'), { max: 1, onnotice: () => {} });
  try {
    await prepareRoleLogins(admin as unknown as Sql, inject('dbAdminUrl'), [alice]);
  } finally {
    await admin.end();
  }
});
afterAll(async () => {
  await provisionOperatorRoles(db.sql, []);
});

/** The SQLSTATE `work` fails with as `role`, or 'committed'. */
async function outcome(role: typeof alice | typeof DatabaseRoles.ops, work: (tx: postgres.TransactionSql) => Promise<unknown>) {
  return db
    .as(role)
    .begin(work)
    .then(
      () => 'committed',
      (error: { code?: string }) => error.code,
    );
}

const auditRow = (source: string, action = 'resolve', inboxIds: string[] = []) =>
  `insert into integration.operator_audit (action, actor, reason, source, affected_count, inbox_ids, consumer_names)
   values ('${action}', 'someone', 'why', '${source}', ${inboxIds.length}, '{${inboxIds.join(',')}}', '{case-projection}')`;

describe("an operator's own role", () => {
  it('logs in, is a member of inbox_ops and nothing else, and loses its login when no longer declared', async () => {
    await settledRoles(async () => {
      expect(
        await db.sql`
          select rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls,
                 array(select g.rolname::text from pg_auth_members m join pg_roles g on g.oid = m.roleid
                       where m.member = r.oid and g.rolname <> 'rds_iam') as member_of
          from pg_roles r where rolname = ${alice}`,
      ).toEqual([
        { rolcanlogin: true, rolsuper: false, rolcreaterole: false, rolcreatedb: false, rolbypassrls: false, member_of: ['inbox_ops'] },
      ]);
    });
    const other = operatorRole('who_did_it_bob');
    await provisionOperatorRoles(db.sql, [OPERATOR, 'who_did_it_bob']);

    const retired = await provisionOperatorRoles(db.sql, [OPERATOR]);

    expect(retired.retired).toEqual([other]);
    expect(await db.sql`select rolcanlogin from pg_roles where rolname = ${other}`).toEqual([{ rolcanlogin: false }]);
  });

  it('replays through the ops commands, and the audit row names its role whatever actor it gives', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);

    const result = await run(
      opsDeps(db.as(alice)),
      { command: 'replay', ids: [row!.inbox_id], reason: 'fixed', actor: 'someone else' },
      cli,
    );

    expect(result).toMatchObject({ replayed: 1 });
    expect(
      await db.sql`select actor, source, session_role from integration.operator_audit where ${row!.inbox_id} = any(inbox_ids)`,
    ).toEqual([{ actor: 'someone else', source: 'cli', session_role: alice }]);
  });
});

describe('changes without their audit row', () => {
  it('refuses a direct status change of inbox rows, as a person and as inbox_ops: nothing changes', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);
    const resolveDirectly = (tx: postgres.TransactionSql) =>
      tx`update integration.consumer_inbox set status = 'IGNORED', processed_at = now() where inbox_id = ${row!.inbox_id}`;

    expect(await outcome(alice, resolveDirectly)).toBe('42501');
    expect(await outcome(DatabaseRoles.ops, resolveDirectly)).toBe('42501');
    expect(await db.sql`select status from integration.consumer_inbox where inbox_id = ${row!.inbox_id}`).toEqual([
      { status: 'QUARANTINED' },
    ]);
  });

  it('refuses a change whose transaction audits other rows, or only as a dry run; takes it audited', async () => {
    const [row, other] = await insertInboxRows(db.sql, [
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
      { status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' },
    ]);
    const resolveWith = (audit: string) => (tx: postgres.TransactionSql) =>
      tx`update integration.consumer_inbox set status = 'IGNORED', processed_at = now() where inbox_id = ${row!.inbox_id}`.then(() =>
        tx.unsafe(audit),
      );

    expect(await outcome(alice, resolveWith(auditRow('cli', 'resolve', [other!.inbox_id])))).toBe('42501');
    expect(
      await outcome(
        alice,
        resolveWith(
          auditRow('cli', 'resolve', [row!.inbox_id])
            .replace('(action,', '(dry_run, action,')
            .replace("values ('resolve'", "values (true, 'resolve'"),
        ),
      ),
    ).toBe('42501');
    expect(await db.sql`select status from integration.consumer_inbox where inbox_id = ${row!.inbox_id}`).toEqual([
      { status: 'QUARANTINED' },
    ]);

    expect(await outcome(alice, resolveWith(auditRow('cli', 'resolve', [row!.inbox_id])))).toBe('committed');
    expect(await db.sql`select status from integration.consumer_inbox where inbox_id = ${row!.inbox_id}`).toEqual([{ status: 'IGNORED' }]);
  });

  it('refuses a pause written without its audit row, and takes one written with it', async () => {
    const pause = `insert into integration.consumer_pause (consumer_name, target, paused_by, audit_id)
                   values ('case-sla', 'worker', 'alice', gen_random_uuid())`;

    expect(await outcome(alice, (tx) => tx.unsafe(pause))).toBe('42501');
    expect(
      await outcome(alice, async (tx) => {
        await tx.unsafe(auditRow('cli', 'pause'));
        await tx.unsafe(pause);
      }),
    ).toBe('committed');
  });
});

describe("the trail's triggers on the tables functions write", () => {
  it('fire once per statement, never per row: the workers and ingest pay no per-row cost for them', async () => {
    const triggers = await db.sql<{ table: string; trigger: string; per_row: boolean }[]>`
      select c.relname as table, t.tgname as trigger, (t.tgtype & 1) = 1 as per_row
      from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_proc p on p.oid = t.tgfoid
      where p.proname = 'operator_changes' order by 1, 2`;

    expect(triggers.map((t) => t.table)).toEqual([
      'consumer_inbox',
      'consumer_inbox',
      'consumer_pause',
      'consumer_pause',
      'consumer_raw_poison',
      'scheduled_replay',
      'scheduled_replay',
    ]);
    expect(triggers.filter((t) => t.per_row)).toEqual([]);
  });
});

describe('forged audit rows', () => {
  it("refuses the ops function's sources from a person's role", async () => {
    expect(await outcome(alice, (tx) => tx.unsafe(auditRow('schedule', 'replay')))).toBe('42501');
    expect(await outcome(alice, (tx) => tx.unsafe(auditRow('lambda')))).toBe('42501');
  });

  it('refuses source schedule on anything but a replay, even from inbox_ops', async () => {
    expect(await outcome(DatabaseRoles.ops, (tx) => tx.unsafe(auditRow('schedule', 'resolve')))).toBe('42501');
  });

  it('records the writer and the transaction time whatever the row says', async () => {
    const [written] = await db.as(alice)<{ session_role: string; at_commit: boolean }[]>`
      insert into integration.operator_audit (action, actor, reason, source, affected_count, created_at, session_role)
      values ('pause', 'bob', 'why', 'cli', 0, '2020-01-01T00:00:00Z', 'inbox_ops_bob')
      returning session_role, created_at = now() as at_commit`;

    expect(written).toEqual({ session_role: alice, at_commit: true });
  });
});

describe('the ops function, through its function URL', () => {
  const handler = createOpsHandler(async () => opsDeps(db.as(DatabaseRoles.ops)), quietOpsLogger, { operatorPrincipals: [OPERATOR_ROLE] });
  const call = async (body: Record<string, unknown>) => {
    const response = (await handler(functionUrlRequest(body, OPERATOR_SESSION), {
      awsRequestId: 'req-url-1',
      invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:inbox-ops',
    })) as Exclude<LambdaFunctionURLResult, string>;
    return { status: response.statusCode, ...(JSON.parse(response.body!) as OpsResponse) };
  };

  it('replays as a dry run unless the request says apply, and records the caller as the actor', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);
    const request = { command: 'replay', ids: [row!.inbox_id], reason: 'fixed upstream' };

    const dry = await call(request);
    const status = await db.sql`select status from integration.consumer_inbox where inbox_id = ${row!.inbox_id}`;
    const applied = await call({ ...request, apply: true });

    expect(dry).toMatchObject({ status: 200, ok: true, result: { dryRun: true, wouldReplay: 1 } });
    expect(status).toEqual([{ status: 'QUARANTINED' }]);
    expect(applied).toMatchObject({ status: 200, ok: true, result: { dryRun: false, replayed: 1 } });
    expect(
      await db.sql`
        select dry_run, actor, source, session_role, request_id from integration.operator_audit
        where ${row!.inbox_id} = any(inbox_ids) order by dry_run desc`,
    ).toEqual([
      { dry_run: true, actor: OPERATOR_SESSION, source: 'lambda', session_role: DatabaseRoles.ops, request_id: 'req-url-1' },
      { dry_run: false, actor: OPERATOR_SESSION, source: 'lambda', session_role: DatabaseRoles.ops, request_id: 'req-url-1' },
    ]);
  });

  it('records no actor the request names: it is refused, and nothing changes', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'DB_TRANSIENT' }]);

    const forged = await call({ command: 'resolve', ids: [row!.inbox_id], reason: 'x', actor: 'the-ceo', apply: true });

    expect(forged).toMatchObject({ status: 400, ok: false, error: { code: 'BAD_ARGUMENTS' } });
    expect(await db.sql`select status from integration.consumer_inbox where inbox_id = ${row!.inbox_id}`).toEqual([
      { status: 'QUARANTINED' },
    ]);
    expect(await db.sql`select count(*)::int as n from integration.operator_audit where actor = 'the-ceo'`).toEqual([{ n: 0 }]);
  });
});
