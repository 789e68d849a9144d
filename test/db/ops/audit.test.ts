import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { migrate } from '../../../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../../../functions/lib/migration-files';
import { emptyDatabase, useTestDatabase } from '../../helpers/db';
import { insertInboxRow, insertPoisonRow } from '../../helpers/factories';
import { allInboxRows, isoMinutesAgo, opsDeps, opsError, run } from './support';

const db = await useTestDatabase();
const deps = opsDeps(db.sql);

beforeEach(async () => {
  await db.sql`truncate integration.operator_audit, integration.consumer_inbox, integration.consumer_raw_poison`;
});

/** An action recorded `minutesAgo`, written with plain SQL (the arrangement does not use the code under test). */
async function recorded(action: string, minutesAgo: number, consumers: string[], extra: { dryRun?: boolean; actor?: string } = {}) {
  const [row] = await db.sql<{ audit_id: string }[]>`
    insert into integration.operator_audit
      (action, actor, reason, source, dry_run, consumer_names, affected_count, created_at)
    values (${action}, ${extra.actor ?? 'alice'}, 'because', 'cli', ${extra.dryRun ?? false}, ${consumers}::text[], 0,
            now() - make_interval(mins => ${minutesAgo}))
    returning audit_id`;
  return row!.audit_id;
}

describe('ops audit', () => {
  it('lists every action newest first, with who, when, why, how many and whether it was a dry run', async () => {
    const older = await recorded('pause', 30, ['case-sla']);
    const newer = await recorded('replay', 5, ['case-projection'], { dryRun: true, actor: 'bob' });

    const { rows, nextCursor } = await run(deps, { command: 'audit' });

    expect(rows.map((r: { audit_id: string }) => r.audit_id)).toEqual([newer, older]);
    expect(rows[0]).toMatchObject({ action: 'replay', actor: 'bob', reason: 'because', dry_run: true, affected_count: 0 });
    expect(nextCursor).toBeNull();
  });

  it('narrows to a consumer, an action and a window', async () => {
    const sla = await recorded('pause', 10, ['case-sla']);
    await recorded('pause', 10, ['case-projection']);
    const both = await recorded('replay', 20, ['case-projection', 'case-sla']);
    await recorded('replay', 3 * 60, ['case-sla']);

    const ids = async (args: Record<string, unknown>) =>
      (await run(deps, { command: 'audit', ...args })).rows.map((r: { audit_id: string }) => r.audit_id);

    expect(await ids({ consumer: 'case-sla', since: '1h' })).toEqual([sla, both]);
    expect(await ids({ consumer: 'case-sla', action: 'replay', since: '1h' })).toEqual([both]);
    expect(await ids({ consumer: 'case-sla', since: await isoMinutesAgo(db.sql, 15) })).toEqual([sla]);
  });

  it('pages by keyset without skipping or repeating rows', async () => {
    const ids = [
      await recorded('pause', 3, ['case-sla']),
      await recorded('resume', 2, ['case-sla']),
      await recorded('pause', 1, ['case-sla']),
    ];

    const first = await run(deps, { command: 'audit', limit: 2 });
    const second = await run(deps, { command: 'audit', limit: 2, cursor: first.nextCursor });

    expect([...first.rows, ...second.rows].map((r: { audit_id: string }) => r.audit_id)).toEqual([...ids].reverse());
    expect(second.nextCursor).toBeNull();
  });

  it('refuses a window it cannot read, an unknown action and an unknown consumer', async () => {
    await opsError(run(deps, { command: 'audit', since: 'yesterday' }), 'BAD_ARGUMENTS');
    await opsError(run(deps, { command: 'audit', action: 'delete' }), 'BAD_ARGUMENTS');
    await opsError(run(deps, { command: 'audit', consumer: 'nobody' }), 'UNKNOWN_CONSUMER');
  });
});

describe('the audit row of an action on inbox rows', () => {
  /** While it is installed, every insert into the audit fails, as a full disk or a lost connection would. */
  async function withFailingAudit(act: () => Promise<unknown>): Promise<unknown> {
    await db.sql.unsafe(`
      create function test_fail_audit() returns trigger language plpgsql as
        $$ begin raise exception 'audit unavailable'; end $$;
      create trigger fail_audit before insert on integration.operator_audit
        for each row execute function test_fail_audit();`);
    try {
      return await act().then(
        () => undefined,
        (e: unknown) => e,
      );
    } finally {
      await db.sql.unsafe('drop trigger fail_audit on integration.operator_audit; drop function test_fail_audit();');
    }
  }

  it.each([
    ['replay', { command: 'replay', consumer: 'case-projection', reason: 'fixed' }],
    ['resolve', { command: 'resolve', consumer: 'case-projection', reason: 'not to be applied' }],
  ])('is written in the same transaction as the %s: no trail, no change', async (_name, input) => {
    await insertInboxRow(db.sql, { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' });
    const before = await allInboxRows(db.sql);

    const error = await withFailingAudit(() => run(deps, input));

    expect((error as { code?: string }).code).toBe('P0001');
    expect(await allInboxRows(db.sql)).toEqual(before);
  });

  it('is written in the same transaction as a poison re-ingest: no trail, no inbox row, poison unresolved', async () => {
    const envelope = {
      eventId: 'evt_reingest_1',
      eventType: 'regulatory.case.accepted.v1',
      eventVersion: 1,
      occurredAt: '2026-07-03T09:15:30Z',
      producer: 'case-command-service',
      aggregateType: 'case',
      aggregateId: 'case_1',
      payload: { caseId: 'case_1', acceptedAt: '2026-07-03T09:15:30Z' },
    };
    // Poisoned once for a reason that no longer holds; today's decoder accepts it.
    const { poison_id } = await insertPoisonRow(db.sql, { rawValue: JSON.stringify(envelope), errorCode: 'ENVELOPE_INVALID' });

    const error = await withFailingAudit(() => run(deps, { command: 'poison-reingest', id: poison_id }));

    expect((error as { code?: string }).code).toBe('P0001');
    expect(await allInboxRows(db.sql)).toEqual([]);
    const [poison] = await db.sql`select resolved_at, resolved_inbox_id from integration.consumer_raw_poison`;
    expect(poison).toEqual({ resolved_at: null, resolved_inbox_id: null });
  });
});

describe('migration 0070', () => {
  it('keeps the replays recorded before it, and keeps them readable under the old name', async () => {
    const old = await emptyDatabase();
    try {
      const all = await loadMigrations(MIGRATIONS_DIR);
      await migrate(
        old.sql,
        all.filter((m) => m.version < 70),
      );
      const auditId = randomUUID();
      const inboxId = randomUUID();
      await old.sql`
        insert into integration.consumer_replay_audit
          (audit_id, actor, reason, source, consumer_names, selection, row_limit, replayed_count, inbox_ids, prior_error_codes, created_at)
        values (${auditId}, 'alice', 'INC-1', 'schedule', '{case-sla}', '{"consumerName": "case-sla"}', 500, 1,
                ${[inboxId]}::uuid[], '{"PAYLOAD_INVALID": 1}', '2026-07-01T10:00:00Z')`;

      await migrate(old.sql, all);

      const [moved] = await old.sql`select * from integration.operator_audit`;
      expect(moved).toMatchObject({
        audit_id: auditId,
        action: 'replay',
        actor: 'alice',
        reason: 'INC-1',
        source: 'schedule',
        dry_run: false,
        consumer_names: ['case-sla'],
        request: { selection: { consumerName: 'case-sla' }, limit: 500 },
        affected_count: 1,
        inbox_ids: [inboxId],
        outcome: { priorErrorCodes: { PAYLOAD_INVALID: 1 } },
        created_at: new Date('2026-07-01T10:00:00Z'),
      });
      const view = await old.sql`select * from integration.consumer_replay_audit`;
      expect(view).toEqual([
        {
          audit_id: auditId,
          actor: 'alice',
          reason: 'INC-1',
          source: 'schedule',
          consumer_names: ['case-sla'],
          selection: { consumerName: 'case-sla' },
          row_limit: 500,
          replayed_count: 1,
          inbox_ids: [inboxId],
          prior_error_codes: { PAYLOAD_INVALID: 1 },
          created_at: new Date('2026-07-01T10:00:00Z'),
        },
      ]);
    } finally {
      await old.drop();
    }
  });
});
