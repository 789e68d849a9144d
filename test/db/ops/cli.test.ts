import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, insertPoisonRow } from '../../helpers/factories';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const root = fileURLToPath(new URL('../../../', import.meta.url));

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npm run ops -- …` as a child process, as inbox_ops on this file's database, and nothing else from our env. */
function ops(...args: string[]): Promise<Outcome> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'functions/ops/cli.ts', ...args],
      {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.urlAs(DatabaseRoles.ops), DB_POOL_MAX: '2' },
        timeout: 60_000,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('the ops CLI', () => {
  it('replays by filter with a table for people and exits 0, recording the actor', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' }]);

    const dry = await ops('replay', '--consumer', 'case-projection', '--dry-run', '--json');
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ ok: true, command: 'replay', result: { dryRun: true, matched: 1 } });

    const real = await ops('replay', '--consumer', 'case-projection', '--reason', 'cli test', '--actor', 'ci-bot');
    expect(real.code).toBe(0);
    expect(real.stdout).toContain('replayed 1 row(s) to RETRY_PENDING');
    expect(real.stdout).toContain(row!.inbox_id);
    const [audit] =
      await db.sql`select actor, reason, source, inbox_ids from integration.operator_audit where action = 'replay' and not dry_run`;
    expect(audit).toEqual({ actor: 'ci-bot', reason: 'cli test', source: 'cli', inbox_ids: [row!.inbox_id] });
  });

  it('exits 2 with a clear message on a bad argument, and 1 when nothing matches, changing nothing', async () => {
    const [row] = await insertInboxRows(db.sql, [{ status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID' }]);

    const noReason = await ops('replay', '--id', row!.inbox_id);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain('REASON_REQUIRED');

    const unknown = await ops('replay', '--consumer', 'nobody', '--reason', 'x', '--json');
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stdout)).toMatchObject({ ok: false, error: { code: 'UNKNOWN_CONSUMER' } });

    const nothing = await ops('replay', '--consumer', 'case-sla', '--reason', 'x');
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toContain('NO_ROWS_MATCH');

    const [after] = await db.sql`select status from integration.consumer_inbox where inbox_id = ${row!.inbox_id}`;
    expect(after).toEqual({ status: 'QUARANTINED' });
  });

  it("tells an offset's story across consumers, and exits 1 when neither inbox nor poison knows it", async () => {
    const [row] = await insertInboxRows(db.sql, [
      { consumerName: 'case-sla', partition: 2, offset: 7_000_001, status: 'PROCESSED', correlationId: 'corr-cli-1' },
    ]);
    const { poison_id } = await insertPoisonRow(db.sql, { consumerName: 'case-projection', partition: 2, offset: 7_000_001 });

    const found = await ops('event', '--topic', 'regulatory.case.events.v1', '--partition', '2', '--offset', '7000001');
    const missing = await ops('event', '--event-id', 'evt_nowhere');

    expect(found.code).toBe(0);
    expect(found.stdout).toContain(`== case-sla: regulatory.case.accepted.v1@1 event ${row!.event_id}`);
    expect(found.stdout).toContain('corr-cli-1');
    expect(found.stdout).toContain(poison_id);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('NOT_FOUND');
  });

  it('lists every command in --help', async () => {
    const help = await ops('--help');
    expect(help.code).toBe(0);
    for (const command of [
      'event (--event-id E',
      'resolve (--id ID',
      'audit [--consumer C]',
      'pause --consumer C',
      'stats [--consumer C]',
    ]) {
      expect(help.stdout).toContain(command);
    }
  });
});
