/**
 * A release never breaks the one before it (docs/migrations.md). The previous release
 * (releases/previous.json) and this checkout, each bundled as it ships and invoked in its
 * own process as its own database role, through a deploy and a rollback:
 *
 *   1. the previous release migrates an empty database and runs;
 *   2. this release's migration function runs while the previous release's ingest keeps
 *      storing batches (a deploy: the platform stack migrates first);
 *   3. the previous release's ingest, worker, reaper, relay and ops keep working on the new
 *      schema (its consumer stacks are not updated yet, or their update rolled back);
 *   4. the previous release's migration function runs again (a CloudFormation rollback of
 *      the platform stack) and finds the database up to date;
 *   5. this release's functions take over and drain what is left.
 *
 * Every event ends stored once per consumer and processed once: its effects exactly once.
 */
import { randomUUID } from 'node:crypto';
import type postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KafkaEvent, KafkaRecord } from '../../../functions/ingest/types';
import { mskEvent, mskRecord } from '../../../tools/msk-events';
import { buildBundles, type FunctionName } from '../../helpers/bundles';
import { checkOutPreviousRelease, recordedPreviousRelease, type PreviousRelease } from '../../helpers/previous-release';
import { createReleaseDatabase, invokeRelease } from '../../helpers/release-functions';

const ROOT = new URL('../../../', import.meta.url).pathname;
const CASE_TOPIC = 'regulatory.case.events.v1';
const PAYMENT_TOPIC = 'payment.completed';
const CASES_PER_PHASE = 4;
const recorded = recordedPreviousRelease();

/** A case's status after its version `v`: accepted first, then a status change each. */
const statusAt = (v: number) => (v === 1 ? 'ACCEPTED' : `STATUS_${v}`);

type Release = 'previous' | 'current';

let previous: PreviousRelease;
let db: Awaited<ReturnType<typeof createReleaseDatabase>>;
let owner: postgres.Sql;
const bundles: Record<Release, string> = { previous: '', current: `${ROOT}.tmp/upgrade-current-${process.pid}` };

beforeAll(async () => {
  previous = await checkOutPreviousRelease();
  bundles.previous = `${previous.root}/.bundles-${process.pid}`;
  await Promise.all([buildBundles(previous.root, bundles.previous), buildBundles(ROOT, bundles.current)]);
  db = await createReleaseDatabase('upgrade');
  owner = db.owner;
}, 600_000);

afterAll(async () => {
  await db?.drop();
});

// ——— what the functions are invoked with ———

/** Invoke one release's bundled function as its own role (the migration function as the owner). */
function invoke(release: Release, fn: FunctionName, event: unknown, consumer?: string): Promise<any> {
  return invokeRelease(release, bundles[release], db, fn, event, consumer === undefined ? {} : { consumer });
}

// ——— the events ———

interface Expected {
  caseEvents: { eventId: string; caseId: string; version: number }[];
  payments: string[];
}
const expected: Expected = { caseEvents: [], payments: [] };
let offset = 0;

function caseRecord(caseId: string, version: number): KafkaRecord {
  const eventId = `evt_${caseId}_v${version}`;
  expected.caseEvents.push({ eventId, caseId, version });
  const accepted = version === 1;
  return mskRecord({
    topic: CASE_TOPIC,
    partition: Number(caseId.slice(-1)) % 3,
    offset: offset++,
    key: caseId,
    value: {
      eventId,
      eventType: accepted ? 'regulatory.case.accepted.v1' : 'regulatory.case.status-changed.v1',
      eventVersion: 1,
      occurredAt: '2026-12-01T09:00:00Z',
      producer: 'case-command-service',
      aggregateType: 'case',
      aggregateId: caseId,
      aggregateVersion: version,
      payload: accepted ? { caseId, acceptedAt: '2026-12-01T09:00:00Z' } : { caseId, newStatus: statusAt(version) },
    },
  });
}

function paymentRecord(): KafkaRecord {
  const eventId = randomUUID();
  expected.payments.push(eventId);
  return mskRecord({
    topic: PAYMENT_TOPIC,
    partition: 0,
    offset: offset++,
    key: eventId,
    value: {
      event_id: eventId,
      event_type: 'payment.completed',
      event_version: 1,
      org_id: '7d1f2c4e-8a9b-4c3d-9e8f-1a2b3c4d5e6f',
      aggregate_id: `pay_${eventId.slice(0, 8)}`,
      occurred_at: '2026-12-01T09:00:00Z',
      payload: { amount_cents: 100 },
    },
  });
}

/** A phase's traffic: new cases accepted, earlier cases moving a version on, payments. */
function phase(name: string, earlierCases: string[]): { cases: string[]; caseBatch: KafkaEvent; paymentBatch: KafkaEvent } {
  const cases = Array.from({ length: CASES_PER_PHASE }, (_, i) => `case_${name}_${i}`);
  const moved = earlierCases.map((caseId) => {
    const last = Math.max(...expected.caseEvents.filter((e) => e.caseId === caseId).map((e) => e.version));
    return caseRecord(caseId, last + 1);
  });
  return {
    cases,
    caseBatch: mskEvent([...cases.flatMap((c) => [caseRecord(c, 1), caseRecord(c, 2)]), ...moved]),
    paymentBatch: mskEvent([paymentRecord(), paymentRecord()]),
  };
}

/** Ingest a phase's batches into every consumer of their topics; each must store the whole batch. */
async function ingestAll(release: Release, p: { caseBatch: KafkaEvent; paymentBatch: KafkaEvent }): Promise<void> {
  for (const consumer of ['case-projection', 'case-sla']) {
    expect(await invoke(release, 'ingest', p.caseBatch, consumer), `${release} ingest ${consumer}`).toEqual({ batchItemFailures: [] });
  }
  expect(await invoke(release, 'ingest', p.paymentBatch, 'notification-service'), `${release} ingest notification-service`).toEqual({
    batchItemFailures: [],
  });
}

async function drain(release: Release): Promise<void> {
  for (const consumer of ['case-projection', 'case-sla', 'notification-service']) {
    const counts = await invoke(release, 'worker', { source: 'schedule' }, consumer);
    expect(counts.quarantined, `${release} worker ${consumer}`).toBe(0);
  }
}

const ledger = () => owner`select version, name, checksum from public.inbox_schema_migrations order by version`;

describe(`the previous release, ${recorded.name} (${recorded.commit.slice(0, 12)}), through a deploy of this one and a rollback`, () => {
  it('keeps storing and processing every event exactly once', async () => {
    // 1. The previous release, alone.
    const installed = await invoke('previous', 'migrate', {});
    expect(installed.applied.length).toBeGreaterThan(0);
    const a = phase('a', []);
    await ingestAll('previous', a);
    await drain('previous');

    // 2. This release migrates while the previous release's ingest stores batches.
    const b = phase('b', a.cases);
    const c = phase('c', a.cases);
    let migrated = false;
    const migrating = invoke('current', 'migrate', {}).finally(() => (migrated = true));
    for (const batch of [b, c]) {
      await ingestAll('previous', batch);
      if (migrated) break;
    }
    const upgrade = await migrating;
    expect(upgrade.newer).toEqual([]);
    expect(upgrade.applied.length, 'this release has migrations of its own to prove').toBeGreaterThan(0);

    // 3. The previous release's functions on the new schema.
    await ingestAll('previous', c);
    await ingestAll('previous', a); // a redelivery of what was stored before the deploy
    await drain('previous');
    expect(await invoke('previous', 'reaper', { source: 'schedule' })).toMatchObject({ released: 0, quarantined: 0 });
    const relayed = await invoke('previous', 'relay', { source: 'schedule' }, 'case-sla');
    expect(relayed.claimed).toBeGreaterThan(0);
    const stats = await invoke('previous', 'ops', { command: 'stats', consumer: 'case-projection' });
    expect(stats).toMatchObject({ ok: true, command: 'stats' });
    // Its ops changes inbox rows with their audit row, which the database now checks (0203).
    const [quarantined] = await owner<{ inbox_id: string }[]>`
      insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id,
                                              topic_name, partition_no, offset_no, producer, occurred_at, status, payload,
                                              quarantined_at, error_code)
      values ('case-projection', 'evt_previous_ops', 't', 1, 'case', 'ops', ${CASE_TOPIC}, 0, 0, 'p', now(), 'QUARANTINED', '{}',
              now(), 'PAYLOAD_INVALID')
      returning inbox_id`;
    const resolved = await invoke('previous', 'ops', {
      command: 'resolve',
      ids: [quarantined!.inbox_id],
      reason: 'upgrade test',
      actor: 'ci',
    });
    expect(resolved).toMatchObject({ ok: true, result: { resolved: 1 } });
    expect(await owner`select status from integration.consumer_inbox where inbox_id = ${quarantined!.inbox_id}`).toEqual([
      { status: 'IGNORED' },
    ]);
    await owner`delete from integration.consumer_inbox where inbox_id = ${quarantined!.inbox_id}`;

    // 4. A rollback: the previous migration function on the newer database.
    const before = await ledger();
    const rolledBack = await invoke('previous', 'migrate', {});
    expect(rolledBack.applied).toEqual([]);
    expect(await ledger()).toEqual(before);

    // 5. This release takes over: its migration finds nothing to do, its functions drain the rest.
    expect(await invoke('current', 'migrate', {})).toMatchObject({ applied: [], newer: [] });
    const d = phase('d', [...a.cases, ...b.cases]);
    await ingestAll('current', d);
    await ingestAll('current', c); // a redelivery across the upgrade
    await drain('current');
    expect(await invoke('current', 'reaper', { source: 'schedule' })).toMatchObject({ released: 0, quarantined: 0 });
    expect(await invoke('current', 'relay', { source: 'schedule' }, 'case-sla')).toMatchObject({ published: 0 });

    // Every event once per consumer, finished.
    const caseIds = [...new Set(expected.caseEvents.map((e) => e.caseId))];
    const rows = await owner<{ consumer_name: string; event_id: string; status: string }[]>`
      select consumer_name, event_id, status from integration.consumer_inbox order by consumer_name, event_id`;
    const caseEventIds = expected.caseEvents.map((e) => e.eventId).sort();
    expect(rows.filter((r) => r.consumer_name === 'case-projection').map((r) => [r.event_id, r.status])).toEqual(
      caseEventIds.map((id) => [id, 'PROCESSED']),
    );
    expect(rows.filter((r) => r.consumer_name === 'case-sla').map((r) => [r.event_id, r.status])).toEqual(
      caseEventIds.map((id) => [id, id.endsWith('_v1') ? 'PROCESSED' : 'IGNORED']),
    );
    expect(rows.filter((r) => r.consumer_name === 'notification-service').map((r) => [r.event_id, r.status])).toEqual(
      [...expected.payments].sort().map((id) => [id, 'PROCESSED']),
    );
    expect(await owner`select count(*)::int as n from integration.consumer_raw_poison`).toEqual([{ n: 0 }]);

    // Their effects once: each case at its last version, one obligation and one outbox event per case, one job per payment.
    const summaries = await owner<{ case_id: string; case_status: string; last_aggregate_version: number }[]>`
      select case_id, case_status, last_aggregate_version::int from read_model.case_summary order by case_id`;
    expect(summaries).toEqual(
      caseIds.sort().map((caseId) => {
        const last = Math.max(...expected.caseEvents.filter((e) => e.caseId === caseId).map((e) => e.version));
        return { case_id: caseId, case_status: statusAt(last), last_aggregate_version: last };
      }),
    );
    expect(await owner`select case_id, count(*)::int as n from case_core.sla_obligation group by case_id order by case_id`).toEqual(
      caseIds.map((caseId) => ({ case_id: caseId, n: 1 })),
    );
    expect(
      await owner`select aggregate_id, count(*)::int as n from integration.outbox group by aggregate_id order by aggregate_id`,
    ).toEqual(caseIds.map((caseId) => ({ aggregate_id: caseId, n: 1 })));
    expect(await owner`select count(*)::int as n, count(distinct source_event_id)::int as events from public.notification_jobs`).toEqual([
      { n: expected.payments.length, events: expected.payments.length },
    ]);
    const audited = await owner<{ n: number; events: number }[]>`
      select count(*)::int as n, count(distinct (consumer_name, source_event_id))::int as events from case_core.case_audit`;
    expect(audited[0]!.n).toBe(audited[0]!.events);
    console.log(
      `previous release ${previous.name} (${previous.commit.slice(0, 12)}): ${expected.caseEvents.length} case events and ` +
        `${expected.payments.length} payments, each stored once per consumer and processed once, through this release's ` +
        `${upgrade.applied.length} migrations (${upgrade.applied.join(', ')}) and a rollback`,
    );
  }, 600_000);
});
