/**
 * The contracts waiting for the next release (migrations/next/, docs/migrations.md
 * "Contracts waiting for the next release") do not break this release. The next release
 * applies them, by moving them into migrations/, while this release's functions still run:
 * so this release's functions, bundled as they ship and invoked as their own roles, must
 * keep working on a database migrated by migrations/ and then migrations/next/ in order:
 * ingest, the workers, the reaper, the relay (its claim, its hand-back, its retention) and
 * ops through its function URL. And with the contracts applied, what they are for holds: no
 * consumer's role can lock a shared table beyond rows.
 */
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSUMERS } from '../../../functions/consumers';
import type { Sql } from '../../../functions/lib/db';
import type { DatabaseRole } from '../../../functions/lib/database-roles';
import { migrate } from '../../../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../../../functions/lib/migration-files';
import { roleUrl } from '../../../tools/database-roles';
import { functionUrlRequest, OPERATOR_ROLE, OPERATOR_SESSION } from '../../../tools/function-url-events';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { buildBundles, type FunctionName } from '../../helpers/bundles';
import { createReleaseDatabase, invokeRelease } from '../../helpers/release-functions';
import { CASE_TOPIC, caseAccepted, PAYMENT_TOPIC, paymentCompleted } from '../ingest/support';
import { lockableByConsumerRoles } from '../security/table-locks';

const ROOT = new URL('../../../', import.meta.url).pathname;
const NEXT_DIR = `${MIGRATIONS_DIR}next/`;
const bundles = `${ROOT}.tmp/next-release-${process.pid}`;

let db: Awaited<ReturnType<typeof createReleaseDatabase>>;
let owner: postgres.Sql;
const clients: postgres.Sql[] = [];

beforeAll(async () => {
  await buildBundles(ROOT, bundles);
  db = await createReleaseDatabase('next');
  owner = db.owner;
}, 600_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.end()));
  await db?.drop();
});

function invoke(fn: FunctionName, event: unknown, options: { consumer?: string; env?: Record<string, string> } = {}): Promise<any> {
  return invokeRelease('current', bundles, db, fn, event, options);
}

const byRole = new Map<DatabaseRole, Sql>();
function as(role: DatabaseRole): Sql {
  let client = byRole.get(role);
  if (client === undefined) {
    const c = postgres(roleUrl(db.adminUrl, role, db.name), { max: 1, onnotice: () => {} });
    clients.push(c);
    byRole.set(role, (client = c as unknown as Sql));
  }
  return client;
}

/** An accepted case, as the case consumers read it, at `offset`. */
function caseRecord(caseId: string, offset: number) {
  const value = caseAccepted(`evt_${caseId}`, { aggregateId: caseId, payload: { caseId, acceptedAt: '2026-12-01T09:00:00Z' } });
  return mskRecord({ topic: CASE_TOPIC, partition: 0, offset, key: caseId, value });
}

const paymentRecord = (offset: number) => mskRecord({ topic: PAYMENT_TOPIC, partition: 0, offset, value: paymentCompleted() });

describe('the contracts waiting in migrations/next/, applied under this release', () => {
  it("keep this release's functions working, and leave no consumer role a table it can lock", async () => {
    // 1. This release's migration function, then the next release's contracts, in order after its newest file.
    expect((await invoke('migrate', {})).applied.length).toBeGreaterThan(0);
    const current = await loadMigrations(MIGRATIONS_DIR);
    const newest = Math.max(...current.map((m) => m.version));
    const contracts = (await loadMigrations(NEXT_DIR)).map((m, i) => ({ ...m, version: newest + 1 + i }));
    expect(contracts.length, 'migrations/next/ holds the contracts this test applies').toBeGreaterThan(0);
    const contracted = await migrate(owner as unknown as Sql, [...current, ...contracts], { log: () => {} });
    expect(contracted.applied).toEqual(contracts.map((m) => m.name));
    expect(
      await owner`select has_table_privilege('inbox_worker', 'integration.consumer_lane', 'DELETE') as worker_deletes,
                         has_table_privilege('inbox_relay', 'integration.outbox', 'DELETE') as relay_deletes`,
    ).toEqual([{ worker_deletes: false, relay_deletes: false }]);

    // 2. Ingest, then every consumer's worker: each claim deletes the lanes it empties (through its function).
    const cases = Array.from({ length: 6 }, (_, i) => `case_next_${i}`);
    const caseBatch = mskEvent(cases.map((c, i) => caseRecord(c, i)));
    for (const consumer of ['case-projection', 'case-sla']) {
      expect(await invoke('ingest', caseBatch, { consumer })).toEqual({ batchItemFailures: [] });
    }
    expect(await invoke('ingest', mskEvent([paymentRecord(10), paymentRecord(11)]), { consumer: 'notification-service' })).toEqual({
      batchItemFailures: [],
    });
    for (const consumer of ['case-projection', 'case-sla', 'notification-service']) {
      expect(await invoke('worker', { source: 'schedule' }, { consumer }), consumer).toMatchObject({ quarantined: 0, retried: 0 });
    }
    expect(
      await owner`select consumer_name, status, count(*)::int as n from integration.consumer_inbox group by 1, 2 order by 1, 2`,
    ).toEqual([
      { consumer_name: 'case-projection', status: 'PROCESSED', n: 6 },
      { consumer_name: 'case-sla', status: 'PROCESSED', n: 6 },
      { consumer_name: 'notification-service', status: 'PROCESSED', n: 2 },
    ]);
    expect(await owner`select count(*)::int as n from integration.consumer_lane`).toEqual([{ n: 0 }]);

    // 3. The reaper.
    expect(await invoke('reaper', { source: 'schedule' })).toEqual({ released: 0, quarantined: 0, purged: 0 });

    // 4. The relay: a lane with nothing left to publish (deleted by its claim), rows published
    //    past the retention (deleted by its retention), and the obligations' events, which the
    //    absent broker refuses (their lanes handed back).
    await owner`
      insert into integration.outbox (event_id, consumer_name, source_event_id, ordinal, topic_name, event_type, event_version,
                                      aggregate_type, aggregate_id, producer, payload, published_at)
      select gen_random_uuid(), 'case-sla', 'evt_old_' || n, 0, 'regulatory.case.sla-obligations.v1',
             'regulatory.case.sla-obligation-opened.v1', 1, 'case', 'case_old', 'case-sla', '{}', now() - interval '30 days'
      from generate_series(1, 3) n`;
    await owner`
      insert into integration.outbox_lane (consumer_name, aggregate_type, aggregate_id, due_at)
      values ('case-sla', 'case', 'case_old', now())`;
    const relayed = await invoke('relay', { source: 'schedule' }, { consumer: 'case-sla' });
    expect(relayed).toMatchObject({ claimed: cases.length, published: 0, purged: 3 });
    expect(await owner`select count(*)::int as n from integration.outbox where aggregate_id = 'case_old'`).toEqual([{ n: 0 }]);
    expect(await owner`select aggregate_id from integration.outbox_lane where aggregate_id = 'case_old'`).toEqual([]);
    expect(await owner`select count(*)::int as n from integration.outbox_lane where locked_by is not null`).toEqual([{ n: 0 }]);

    // 5. Ops, through its function URL as an operator: a replay, applied, audited by the database.
    const [quarantined] = await owner<{ inbox_id: string }[]>`
      update integration.consumer_inbox set status = 'QUARANTINED', quarantined_at = now(), processed_at = null,
                                            error_code = 'PAYLOAD_INVALID'
      where consumer_name = 'case-projection' and event_id = ${`evt_${cases[0]}`}
      returning inbox_id`;
    const response = await invoke(
      'ops',
      functionUrlRequest({ command: 'replay', ids: [quarantined!.inbox_id], reason: 'next release', apply: true }, OPERATOR_SESSION),
      {
        env: { OPERATOR_PRINCIPALS: JSON.stringify([OPERATOR_ROLE]) },
      },
    );
    expect(response).toMatchObject({ statusCode: 200 });
    expect(JSON.parse(response.body)).toMatchObject({ ok: true, result: { replayed: 1 } });
    expect(await owner`select actor, session_role from integration.operator_audit where ${quarantined!.inbox_id} = any(inbox_ids)`).toEqual(
      [{ actor: OPERATOR_SESSION, session_role: 'inbox_ops' }],
    );
    expect(await invoke('worker', { source: 'schedule' }, { consumer: 'case-projection' })).toMatchObject({ processed: 1 });

    // 6. What the contracts are for: no consumer role can lock any shared table beyond rows.
    expect(await lockableByConsumerRoles(owner as unknown as Sql, CONSUMERS, as)).toEqual([]);
  }, 600_000);
});
