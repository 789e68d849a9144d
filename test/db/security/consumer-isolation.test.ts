/**
 * One consumer's roles cannot touch another consumer's rows or tables (migrations/0130,
 * 0150, and 0160 for the relay's):
 * for each statement, run as a consumer's own role, its own consumer's rows are reached
 * and another consumer's affect no row or are refused with SQLSTATE 42501. Every
 * statement runs in a transaction that is rolled back, so the cases do not disturb each
 * other; the rows are arranged once by the owner.
 */
import postgres from 'postgres';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { caseSla } from '../../../functions/consumers/case-sla';
import { CONSUMERS } from '../../../functions/consumers/index';
import { notificationService } from '../../../functions/consumers/notification-service';
import type { ConsumerDeclaration } from '../../../functions/framework/types';
import { provisionConsumerRoles } from '../../../functions/inbox/consumer-roles';
import type { Sql } from '../../../functions/lib/db';
import { DatabaseRoles, ingestRoleOf, relayRoleOf, workerRoleOf, type DatabaseRole } from '../../../functions/lib/database-roles';
import { claimOutbox } from '../../../functions/outbox/claim-outbox';
import { prepareRoleLogins } from '../../../tools/database-roles';
import { settledRoles, useTestDatabase } from '../../helpers/db';
import { insertInboxRows, insertPoisonRow, pauseConsumer } from '../../helpers/factories';

const db = await useTestDatabase();
const sql = db.sql;

const projectionWorker = workerRoleOf(caseProjection);
const slaWorker = workerRoleOf(caseSla);
const notificationWorker = workerRoleOf(notificationService);
const projectionIngest = ingestRoleOf(caseProjection);
const notificationIngest = ingestRoleOf(notificationService);

type Outcome = { rows: number } | { code: string };

/**
 * What `statement` does as `role` (after `before`, in the same transaction): the rows it
 * returned or changed, or the SQLSTATE it failed with. Always rolled back.
 */
async function outcome(role: DatabaseRole, statement: string, before?: string): Promise<Outcome> {
  let result: Outcome | undefined;
  try {
    await db.as(role).begin(async (tx) => {
      if (before !== undefined) await tx.unsafe(before);
      const r = await tx.unsafe(statement);
      result = { rows: r.count };
      throw new Error('rollback');
    });
  } catch (error) {
    if (result !== undefined) return result;
    return { code: (error as { code?: string }).code ?? (error as Error).message };
  }
  throw new Error('unreachable');
}

const REFUSED = { code: '42501' };
const NONE = { rows: 0 };

const inboxRow = (consumer: string, eventId: string) =>
  `insert into integration.consumer_inbox (consumer_name, event_id, event_type, event_version, aggregate_type, aggregate_id, topic_name, partition_no, offset_no, producer, occurred_at, status, payload)
   values ('${consumer}', '${eventId}', 't', 1, 'case', 'a', 't', 0, 0, 'p', now(), 'RECEIVED', '{}')`;
const poisonRow = (consumer: string) =>
  `insert into integration.consumer_raw_poison (consumer_name, topic_name, partition_no, offset_no, raw_value, error_code, error_message)
   values ('${consumer}', 't', 9, 9, 'x', 'INVALID_JSON', 'm')`;
const outboxRow = (consumer: string) =>
  `insert into integration.outbox (event_id, consumer_name, source_event_id, ordinal, topic_name, event_type, event_version, aggregate_type, aggregate_id, producer, payload)
   values (gen_random_uuid(), '${consumer}', gen_random_uuid()::text, 0, 't', 'x', 1, 'case', 'a', 'p', '{}')`;
const auditRow = (consumer: string) =>
  `insert into case_core.case_audit (case_id, consumer_name, source_event_id, change) values ('c', '${consumer}', 'e-${consumer}', 'X')`;
const processRows = (consumer: string) =>
  `update integration.consumer_inbox set status = 'PROCESSED', processed_at = now() where consumer_name = '${consumer}'`;

beforeAll(async () => {
  // Queued rows of three consumers (each with its lane), a poison row, a worker slot, a pause and an outbox row each.
  for (const consumer of ['case-projection', 'case-sla', 'notification-service']) {
    await insertInboxRows(sql, [
      { consumerName: consumer, aggregateId: `agg_${consumer}` },
      { consumerName: consumer, aggregateId: `agg2_${consumer}` },
    ]);
    await insertPoisonRow(sql, { consumerName: consumer });
    await sql`insert into integration.consumer_worker_slot (consumer_name, slot_no) values (${consumer}, 1)`;
    await sql.unsafe(outboxRow(consumer));
  }
  for (const consumer of ['case-projection', 'case-sla']) {
    await sql`
      insert into integration.consumed_events (consumer_name, event_id, inbox_id, event_type, status, topic_name, partition_no,
                                               offset_no, received_at, processed_at, dedupe_until)
      values (${consumer}, ${`left-${consumer}`}, gen_random_uuid(), 't', 'PROCESSED', 't', 0, 0, now(), now(), now() + interval '30 days')`;
  }
  await pauseConsumer(sql, 'case-sla');
  await sql.unsafe(auditRow('case-projection'));
  await sql.unsafe(auditRow('case-sla'));
});

describe("a consumer's worker role and the inbox (reads held to its own rows, writes guarded per statement)", () => {
  it("moves its own consumer's rows through the status machine", async () => {
    expect(await outcome(projectionWorker, processRows('case-projection'))).toEqual({ rows: 2 });
  });

  it("changes no row of another consumer's: it does not see them, and a change that reaches them unseen is refused", async () => {
    // A WHERE on the table's columns reads it, under the read policy: another consumer's rows are not there.
    expect(await outcome(projectionWorker, processRows('notification-service'))).toEqual(NONE);
    expect(await outcome(slaWorker, processRows('case-projection'))).toEqual(NONE);
    // Without a WHERE the statement reaches every row, and the own-rows trigger refuses it whole.
    expect(await outcome(projectionWorker, `update integration.consumer_inbox set status = 'PROCESSED', processed_at = now()`)).toEqual(
      REFUSED,
    );
  });

  it('can neither insert nor delete inbox rows, its own included', async () => {
    expect(await outcome(projectionWorker, inboxRow('case-projection', 'w-own'))).toEqual(REFUSED);
    expect(await outcome(projectionWorker, `delete from integration.consumer_inbox where consumer_name = 'case-projection'`)).toEqual(
      REFUSED,
    );
  });
});

describe("a consumer's ingest role and the inbox", () => {
  it("stores its own consumer's events and is refused another's", async () => {
    expect(await outcome(projectionIngest, inboxRow('case-projection', 'i-own'))).toEqual({ rows: 1 });
    expect(await outcome(projectionIngest, inboxRow('case-sla', 'i-other'))).toEqual(REFUSED);
    expect(await outcome(notificationIngest, inboxRow('case-projection', 'i-other'))).toEqual(REFUSED);
  });

  it("an inline consumer's ingest finishes its own rows and changes none of another's", async () => {
    expect(await outcome(notificationIngest, processRows('notification-service'))).toEqual({ rows: 2 });
    expect(await outcome(notificationIngest, processRows('case-projection'))).toEqual(NONE);
  });
});

describe('the lanes (reads held to its own lanes, writes guarded per statement)', () => {
  const dueNow = (consumer: string) => `update integration.consumer_lane set due_at = now() where consumer_name = '${consumer}'`;
  const drop = (consumer: string) => `delete from integration.consumer_lane where consumer_name = '${consumer}'`;
  const add = (consumer: string) =>
    `insert into integration.consumer_lane (consumer_name, aggregate_type, aggregate_id, due_at) values ('${consumer}', 'case', 'new', now())`;

  it("a worker changes, deletes and adds its own consumer's lanes", async () => {
    expect(await outcome(projectionWorker, dueNow('case-projection'))).toEqual({ rows: 2 });
    expect(await outcome(projectionWorker, drop('case-projection'))).toEqual({ rows: 2 });
    expect(await outcome(projectionWorker, add('case-projection'))).toEqual({ rows: 1 });
  });

  it("and changes none of another consumer's: unseen, or refused", async () => {
    expect(await outcome(projectionWorker, dueNow('case-sla'))).toEqual(NONE);
    expect(await outcome(projectionWorker, drop('case-sla'))).toEqual(NONE);
    expect(await outcome(projectionWorker, add('case-sla'))).toEqual(REFUSED);
    expect(await outcome(projectionWorker, `update integration.consumer_lane set due_at = now()`)).toEqual(REFUSED);
  });
});

describe("reads of the inbox and the lanes: each consumer's roles see their own consumer's rows only", () => {
  const consumers = [caseProjection, caseSla, notificationService] as const;
  // Each consumer has two inbox rows and two lanes (beforeAll); an ingest role may read the key columns only.
  const inboxOf = (where: string) => `select consumer_name, event_id from integration.consumer_inbox where ${where}`;
  const lanesOf = (where: string) => `select * from integration.consumer_lane where ${where}`;

  it.each(consumers.flatMap((c) => [[workerRoleOf(c), c.name] as const, [ingestRoleOf(c), c.name] as const]))(
    '%s: its own inbox rows, none of another consumer',
    async (role, own) => {
      expect(await outcome(role, inboxOf(`consumer_name = '${own}'`))).toEqual({ rows: 2 });
      expect(await outcome(role, inboxOf(`consumer_name <> '${own}'`))).toEqual(NONE);
      expect(await outcome(role, inboxOf('true'))).toEqual({ rows: 2 });
      for (const other of consumers.filter((c) => c.name !== own)) {
        expect(await outcome(role, inboxOf(`consumer_name = '${other.name}'`))).toEqual(NONE);
      }
    },
  );

  it.each(consumers.map((c) => [workerRoleOf(c), c.name] as const))('%s: its own lanes, none of another consumer', async (role, own) => {
    expect(await outcome(role, lanesOf(`consumer_name = '${own}'`))).toEqual({ rows: 2 });
    expect(await outcome(role, lanesOf(`consumer_name <> '${own}'`))).toEqual(NONE);
    expect(await outcome(role, lanesOf('true'))).toEqual({ rows: 2 });
  });

  it("an ingest role reads no lane (no grant: its lanes are written by the inbox's triggers)", async () => {
    for (const c of consumers) expect(await outcome(ingestRoleOf(c), lanesOf('true'))).toEqual(REFUSED);
  });

  it("a worker cannot read another consumer's payload by its id either", async () => {
    const [row] = await sql<
      { inbox_id: string }[]
    >`select inbox_id from integration.consumer_inbox where consumer_name = 'case-sla' limit 1`;
    expect(await outcome(projectionWorker, `select payload from integration.consumer_inbox where inbox_id = '${row!.inbox_id}'`)).toEqual(
      NONE,
    );
    expect(await outcome(slaWorker, `select payload from integration.consumer_inbox where inbox_id = '${row!.inbox_id}'`)).toEqual({
      rows: 1,
    });
  });

  it('evaluates the policy once per statement: the consumer lookup is an InitPlan, not a per-row SubPlan', async () => {
    for (const table of ['integration.consumer_inbox', 'integration.consumer_lane']) {
      const plan = (await db.as(projectionWorker).unsafe(`explain select * from ${table}`)).map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toMatch(/InitPlan/);
      expect(plan).not.toMatch(/SubPlan/);
    }
  });

  it("the reaper and the ops function read every consumer's rows and lanes", async () => {
    for (const role of [DatabaseRoles.reaper, DatabaseRoles.ops]) {
      expect(await outcome(role, inboxOf('true'))).toEqual({ rows: 6 });
      expect(await outcome(role, lanesOf('true'))).toEqual({ rows: 6 });
    }
  });
});

describe('row-level security: poison, kept keys, worker slots, pauses, outbox, case audit', () => {
  it("an ingest role sees its own consumer's poison keys only, and stores poison for its own consumer only", async () => {
    expect(await outcome(projectionIngest, `select consumer_name, offset_no from integration.consumer_raw_poison`)).toEqual({ rows: 1 });
    expect(await outcome(projectionIngest, poisonRow('case-projection'))).toEqual({ rows: 1 });
    expect(await outcome(projectionIngest, poisonRow('case-sla'))).toEqual(REFUSED);
  });

  it("an ingest role sees the kept keys of its own consumer's rows that left the inbox only", async () => {
    expect(await outcome(projectionIngest, `select consumer_name, event_id from integration.consumed_events`)).toEqual({ rows: 1 });
    expect(await outcome(projectionIngest, `select event_id from integration.consumed_events where consumer_name = 'case-sla'`)).toEqual(
      NONE,
    );
  });

  it("a worker sees and takes its own consumer's slots only", async () => {
    expect(await outcome(projectionWorker, `select * from integration.consumer_worker_slot`)).toEqual({ rows: 1 });
    expect(
      await outcome(
        projectionWorker,
        `update integration.consumer_worker_slot set held_by = 'me', held_until = now() + interval '1 minute', updated_at = now() where consumer_name = 'case-projection'`,
      ),
    ).toEqual({ rows: 1 });
    expect(
      await outcome(
        projectionWorker,
        `update integration.consumer_worker_slot set held_by = 'me', held_until = now() + interval '1 minute', updated_at = now() where consumer_name = 'case-sla'`,
      ),
    ).toEqual(NONE);
    expect(
      await outcome(projectionWorker, `insert into integration.consumer_worker_slot (consumer_name, slot_no) values ('case-sla', 2)`),
    ).toEqual(REFUSED);
  });

  it("a worker reads its own consumer's pause only", async () => {
    expect(await outcome(slaWorker, `select * from integration.consumer_pause`)).toEqual({ rows: 1 });
    expect(await outcome(projectionWorker, `select * from integration.consumer_pause`)).toEqual(NONE);
  });

  it('a worker emits for its own consumer only, and sees only its own emissions', async () => {
    expect(await outcome(slaWorker, outboxRow('case-sla'))).toEqual({ rows: 1 });
    expect(await outcome(slaWorker, outboxRow('case-projection'))).toEqual(REFUSED);
    expect(await outcome(slaWorker, `select event_id from integration.outbox`)).toEqual({ rows: 1 });
  });

  it('a case consumer audits for itself only', async () => {
    expect(await outcome(slaWorker, auditRow('case-sla').replace("'e-case-sla'", "'e2'"))).toEqual({ rows: 1 });
    expect(await outcome(slaWorker, auditRow('case-projection').replace("'e-case-projection'", "'e2'"))).toEqual(REFUSED);
  });

  it('evaluates the policy once per statement: the consumer lookup is an InitPlan, not a per-row SubPlan', async () => {
    const plan = (await db.as(projectionIngest).unsafe(`explain select consumer_name, offset_no from integration.consumer_raw_poison`))
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan).toMatch(/InitPlan/);
    expect(plan).not.toMatch(/SubPlan/);
  });
});

describe('domain tables: granted to the consumer that declares them only', () => {
  const summary = `insert into read_model.case_summary (case_id, case_status) values ('c_iso', 'ACCEPTED')`;
  const obligation = `insert into case_core.sla_obligation (case_id, obligation_type, due_at, source_event_id, status) values ('c_iso', 't', now(), 'e', 'OPEN')`;
  const job = `insert into public.notification_jobs (organization_id, channel, payload) values (gen_random_uuid(), 'email', '{}')`;

  it.each([
    ['case-projection writes the case summary', projectionWorker, summary, { rows: 1 }],
    ['case-sla cannot write the case summary', slaWorker, summary, REFUSED],
    ['notification-service cannot write the case summary', notificationWorker, summary, REFUSED],
    ['case-sla opens obligations', slaWorker, obligation, { rows: 1 }],
    ['case-projection cannot open obligations', projectionWorker, obligation, REFUSED],
    ['notification-service (its ingest) writes jobs', notificationIngest, job, { rows: 1 }],
    ['notification-service (its worker) writes jobs', notificationWorker, job, { rows: 1 }],
    ['case-projection cannot write jobs', projectionWorker, job, REFUSED],
    ['case-projection cannot read obligations', projectionWorker, `select * from case_core.sla_obligation`, REFUSED],
    ['case-projection cannot delete case summaries', projectionWorker, `delete from read_model.case_summary`, REFUSED],
    ["a deferred consumer's ingest writes no domain table", projectionIngest, summary, REFUSED],
  ] as const)('%s', async (_, role, statement, expected) => {
    expect(await outcome(role, statement)).toEqual(expected);
  });
});

describe('roles', () => {
  it("SET ROLE to another consumer's role is refused", async () => {
    expect(await outcome(projectionWorker, `set local role ${slaWorker}`)).toEqual(REFUSED);
    expect(await outcome(projectionWorker, `set local role ${projectionIngest}`)).toEqual(REFUSED);
    expect(await outcome(projectionIngest, `set local role ${notificationIngest}`)).toEqual(REFUSED);
  });

  it('the kind role, reached by SET ROLE, serves no consumer: its writes are refused, its policies match no row', async () => {
    const asKind = async (statement: string) => outcome(projectionWorker, statement, `set local role ${DatabaseRoles.worker}`);
    expect(await asKind(processRows('case-sla'))).toEqual(NONE);
    expect(await asKind(processRows('case-projection'))).toEqual(NONE);
    expect(await asKind(`update integration.consumer_inbox set status = 'PROCESSED', processed_at = now()`)).toEqual(REFUSED);
    expect(await asKind(`select * from integration.consumer_worker_slot`)).toEqual(NONE);
    expect(await asKind(`select * from integration.consumer_inbox`)).toEqual(NONE);
    expect(await asKind(`select * from integration.consumer_lane`)).toEqual(NONE);
  });

  it('the kind roles of ingest and worker cannot log in, whatever their password', async () => {
    const adminUrl = inject('dbAdminUrl');
    const kinds = [DatabaseRoles.ingest, DatabaseRoles.ingestInline, DatabaseRoles.worker];
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    try {
      await prepareRoleLogins(admin as unknown as Sql, adminUrl, kinds);
    } finally {
      await admin.end();
    }
    await settledRoles(async () => {
      for (const role of kinds) {
        const kind = db.client({ max: 1, role });
        await expect(kind`select 1`, role).rejects.toMatchObject({ code: '28000' });
      }
    });
  });
});

describe("the relay: each emitting consumer's relay role reaches its own consumer's outbox rows and lanes only", () => {
  // A second emitting consumer of this test's own, beside case-sla (the reference consumer that emits).
  const emitter: ConsumerDeclaration = { ...caseSla, name: 'isolation-emitter' };
  const slaRelay = relayRoleOf(caseSla);
  const emitterRelay = relayRoleOf(emitter);
  const rowsOf = (table: string, consumer: string) => `select * from integration.${table} where consumer_name = '${consumer}'`;

  beforeAll(async () => {
    await db.provision([...CONSUMERS, emitter]);
    await sql.unsafe(outboxRow(emitter.name));
  });

  it('each emitting consumer has a relay role, a member of inbox_relay; a consumer that emits nothing has none', async () => {
    const roles = await sql<{ role_name: string; consumer_name: string; groups: string[] }[]>`
      select r.role_name, r.consumer_name,
             array(select g.rolname::text from pg_auth_members m join pg_roles g on g.oid = m.roleid
                   where m.member = r.role_name::regrole and g.rolname <> 'rds_iam' order by 1) as groups
      from integration.consumer_role r where r.kind = 'relay' and r.retired_at is null order by r.role_name`;
    expect(roles).toEqual([
      { role_name: 'inbox_relay_case_sla', consumer_name: 'case-sla', groups: ['inbox_relay'] },
      { role_name: 'inbox_relay_isolation_emitter', consumer_name: 'isolation-emitter', groups: ['inbox_relay'] },
    ]);
  });

  it.each([
    ['outbox', slaRelay, 'case-sla', emitter.name],
    ['outbox', emitterRelay, emitter.name, 'case-sla'],
    ['outbox_lane', slaRelay, 'case-sla', emitter.name],
    ['outbox_lane', emitterRelay, emitter.name, 'case-sla'],
  ] as const)('%s, as %s: its own rows only, none of another consumer', async (table, role, own, other) => {
    expect(await outcome(role, `select * from integration.${table}`)).toEqual({ rows: 1 });
    expect(await outcome(role, rowsOf(table, own))).toEqual({ rows: 1 });
    expect(await outcome(role, rowsOf(table, other))).toEqual(NONE);
    expect(await outcome(role, rowsOf(table, 'case-projection'))).toEqual(NONE);
  });

  it.each([
    [slaRelay, 'case-sla', emitter.name],
    [emitterRelay, emitter.name, 'case-sla'],
  ] as const)('%s marks and deletes its own outbox rows, and none of another consumer', async (role, own, other) => {
    const mark = (consumer: string) =>
      `update integration.outbox set claimed_by = 'r', claimed_at = now() where consumer_name = '${consumer}' and published_at is null`;
    const publish = (consumer: string) => `update integration.outbox set published_at = now() where consumer_name = '${consumer}'`;
    const remove = (consumer: string) => `delete from integration.outbox where consumer_name = '${consumer}'`;
    expect(await outcome(role, mark(own))).toEqual({ rows: 1 });
    expect(await outcome(role, publish(own))).toEqual({ rows: 1 });
    expect(await outcome(role, remove(own))).toEqual({ rows: 1 });
    for (const consumer of [other, 'case-projection']) {
      expect(await outcome(role, mark(consumer))).toEqual(NONE);
      expect(await outcome(role, publish(consumer))).toEqual(NONE);
      expect(await outcome(role, remove(consumer))).toEqual(NONE);
    }
    // Without a condition: its own row only.
    expect(await outcome(role, `update integration.outbox set published_at = now()`)).toEqual({ rows: 1 });
    expect(await outcome(role, `delete from integration.outbox`)).toEqual({ rows: 1 });
  });

  it.each([
    [slaRelay, 'case-sla', emitter.name],
    [emitterRelay, emitter.name, 'case-sla'],
  ] as const)('%s locks, releases and deletes its own lanes, and none of another consumer', async (role, own, other) => {
    const lock = (consumer: string) =>
      `update integration.outbox_lane set locked_by = 'r', locked_at = now(), lease_expires_at = now() + interval '1 minute', due_at = null where consumer_name = '${consumer}'`;
    const remove = (consumer: string) => `delete from integration.outbox_lane where consumer_name = '${consumer}'`;
    expect(await outcome(role, lock(own))).toEqual({ rows: 1 });
    expect(await outcome(role, remove(own))).toEqual({ rows: 1 });
    for (const consumer of [other, 'case-projection']) {
      expect(await outcome(role, lock(consumer))).toEqual(NONE);
      expect(await outcome(role, remove(consumer))).toEqual(NONE);
    }
    expect(await outcome(role, `delete from integration.outbox_lane`)).toEqual({ rows: 1 });
  });

  it('cannot move a row or a lane to another consumer, rewrite a payload, or add a lane', async () => {
    expect(await outcome(slaRelay, `update integration.outbox set consumer_name = '${emitter.name}'`)).toEqual(REFUSED);
    expect(await outcome(slaRelay, `update integration.outbox set payload = '{}'`)).toEqual(REFUSED);
    expect(await outcome(slaRelay, `update integration.outbox_lane set consumer_name = '${emitter.name}'`)).toEqual(REFUSED);
    expect(
      await outcome(
        slaRelay,
        `insert into integration.outbox_lane (consumer_name, aggregate_type, aggregate_id, due_at) values ('case-sla', 'case', 'z', now())`,
      ),
    ).toEqual(REFUSED);
  });

  it("a claim for another consumer, run as a relay role, is refused: its lane deletion is its own consumer's only", async () => {
    const refusal = await db
      .as(emitterRelay)
      .begin(async (tx) => {
        await claimOutbox(tx, { owner: 'r', consumerName: 'case-sla', limit: 10, runLength: 10, leaseSeconds: 60 });
      })
      .then(
        () => 'claimed',
        (error: { code?: string }) => error.code,
      );
    expect(refusal).toBe('42501');
    expect(await db.sql`select count(*)::int as n from integration.outbox where claimed_by = 'r'`).toEqual([{ n: 0 }]);
    const own = await db
      .as(emitterRelay)
      .begin(async (tx) => {
        const c = await claimOutbox(tx, { owner: 'r', consumerName: emitter.name, limit: 10, runLength: 10, leaseSeconds: 60 });
        throw Object.assign(new Error('rollback'), { claim: c });
      })
      .catch((error: { claim?: unknown }) => error.claim as { rows: { consumer_name: string }[] });
    expect(own!.rows.map((r) => r.consumer_name)).toEqual([emitter.name]);
  });

  it('evaluates the policies once per statement: the consumer lookup is an InitPlan, not a per-row SubPlan', async () => {
    for (const table of ['outbox', 'outbox_lane']) {
      const plan = (await db.as(slaRelay).unsafe(`explain select * from integration.${table}`)).map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toMatch(/InitPlan/);
      expect(plan).not.toMatch(/SubPlan/);
    }
  });

  it("SET ROLE to another consumer's relay role, or to another function's role, is refused", async () => {
    expect(await outcome(slaRelay, `set local role ${emitterRelay}`)).toEqual(REFUSED);
    expect(await outcome(emitterRelay, `set local role ${slaRelay}`)).toEqual(REFUSED);
    expect(await outcome(slaRelay, `set local role ${slaWorker}`)).toEqual(REFUSED);
    expect(await outcome(slaWorker, `set local role ${slaRelay}`)).toEqual(REFUSED);
  });

  it('inbox_relay, reached by SET ROLE, serves no consumer: its policies match no row', async () => {
    const asKind = async (statement: string) => outcome(slaRelay, statement, `set local role ${DatabaseRoles.relay}`);
    expect(await asKind(`select * from integration.outbox`)).toEqual(NONE);
    expect(await asKind(`select * from integration.outbox_lane`)).toEqual(NONE);
    expect(await asKind(`update integration.outbox set published_at = now()`)).toEqual(NONE);
    expect(await asKind(`delete from integration.outbox_lane`)).toEqual(NONE);
  });

  it('inbox_relay cannot log in, whatever its password', async () => {
    const adminUrl = inject('dbAdminUrl');
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    try {
      await prepareRoleLogins(admin as unknown as Sql, adminUrl, [DatabaseRoles.relay]);
    } finally {
      await admin.end();
    }
    await settledRoles(async () => {
      const kind = db.client({ max: 1, role: DatabaseRoles.relay });
      await expect(kind`select 1`).rejects.toMatchObject({ code: '28000' });
    });
  });

  it('a consumer no longer declared has its relay role retired: no login, no rows', async () => {
    const result = await provisionConsumerRoles(sql, CONSUMERS);

    expect(result.retired).toContain(emitterRelay);
    expect(await sql`select consumer_of_role from integration.consumer_of_role(${emitterRelay})`).toEqual([{ consumer_of_role: null }]);
    const fresh = db.client({ max: 1, role: emitterRelay });
    await expect(fresh`select 1`).rejects.toMatchObject({ code: '28000' });
  });
});

describe("the consumer roles' step", () => {
  const adminUrl = inject('dbAdminUrl');
  // A consumer of this test's own: its roles are server-wide, so no reference consumer's are retired here.
  // It emits nothing (so has no relay role): the relay's roles have their own test below.
  const gone: ConsumerDeclaration = {
    ...caseSla,
    name: 'isolation-gone',
    emits: {},
    tables: { 'read_model.case_summary': { select: true } },
  };

  async function provision(consumers: readonly ConsumerDeclaration[]) {
    const result = await provisionConsumerRoles(sql, consumers);
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    try {
      await prepareRoleLogins(admin as unknown as Sql, adminUrl, result.roles);
    } finally {
      await admin.end();
    }
    return result;
  }

  it("creates a declared consumer's roles as members of their kinds, granted exactly its tables", async () => {
    const result = await provision([...CONSUMERS, gone]);

    expect(result.roles).toEqual(expect.arrayContaining(['inbox_ingest_isolation_gone', 'inbox_worker_isolation_gone']));
    const [role] = await sql<{ login: boolean; groups: string[]; summary: boolean; obligations: boolean }[]>`
      select r.rolcanlogin as login,
             array(select g.rolname::text from pg_auth_members m join pg_roles g on g.oid = m.roleid where m.member = r.oid order by 1) as groups,
             has_table_privilege(r.rolname, 'read_model.case_summary', 'SELECT') as summary,
             has_table_privilege(r.rolname, 'case_core.sla_obligation', 'INSERT') as obligations
      from pg_roles r where r.rolname = 'inbox_worker_isolation_gone'`;
    expect(role).toEqual({ login: true, groups: ['inbox_worker'], summary: true, obligations: false });
  });

  it('retires the roles of a consumer no longer declared: no login, no rows', async () => {
    await provision([...CONSUMERS, gone]);
    await sql`insert into integration.consumer_worker_slot (consumer_name, slot_no) values ('isolation-gone', 1) on conflict do nothing`;
    expect(await outcome('inbox_worker_isolation_gone', `select * from integration.consumer_worker_slot`)).toEqual({ rows: 1 });

    const result = await provisionConsumerRoles(sql, CONSUMERS);

    expect(result.retired.sort()).toEqual(['inbox_ingest_isolation_gone', 'inbox_worker_isolation_gone']);
    const [role] = await sql<{ login: boolean; summary: boolean }[]>`
      select rolcanlogin as login, has_table_privilege(rolname, 'read_model.case_summary', 'SELECT') as summary
      from pg_roles where rolname = 'inbox_worker_isolation_gone'`;
    expect(role).toEqual({ login: false, summary: false });
    expect(await sql`select consumer_of_role from integration.consumer_of_role('inbox_worker_isolation_gone')`).toEqual([
      { consumer_of_role: null },
    ]);
    const fresh = db.client({ max: 1, role: 'inbox_worker_isolation_gone' });
    await expect(fresh`select 1`).rejects.toMatchObject({ code: '28000' });
  });

  it('refuses a role that exists with more than LOGIN, changing nothing', async () => {
    await sql`drop role if exists inbox_worker_isolation_mighty`;
    await sql`create role inbox_worker_isolation_mighty login createdb`;
    try {
      const mighty: ConsumerDeclaration = { ...caseSla, name: 'isolation-mighty' };
      await expect(provisionConsumerRoles(sql, [...CONSUMERS, mighty])).rejects.toMatchObject({ code: '42501' });
      expect(await sql`select role_name from integration.consumer_role where consumer_name = 'isolation-mighty'`).toEqual([]);
    } finally {
      await sql`drop role inbox_worker_isolation_mighty`;
    }
  });

  it('refuses two consumers whose names map to one role', async () => {
    const a: ConsumerDeclaration = { ...caseSla, name: 'isolation-twin' };
    const b: ConsumerDeclaration = { ...caseSla, name: 'isolation_twin' };
    await expect(provisionConsumerRoles(sql, [...CONSUMERS, a, b])).rejects.toThrow(
      /map to one database role, inbox_ingest_isolation_twin/,
    );
  });
});

describe("the reaper's purge", () => {
  it('can set only the purged form: a purge empties payload and headers, a rewrite is refused', async () => {
    const [finished] = await insertInboxRows(sql, [
      { consumerName: 'case-sla', status: 'PROCESSED', payload: { secret: 'kept until purged' } },
    ]);
    const reaper = DatabaseRoles.reaper;

    expect(
      await outcome(reaper, `update integration.consumer_inbox set payload = '{"forged": true}' where inbox_id = '${finished!.inbox_id}'`),
    ).toEqual(REFUSED);
    expect(
      await outcome(reaper, `update integration.consumer_inbox set headers = '{"forged": true}' where inbox_id = '${finished!.inbox_id}'`),
    ).toEqual(REFUSED);
    await db.as(reaper)`update integration.consumer_inbox set payload_purged_at = now() where inbox_id = ${finished!.inbox_id}`;

    expect(await sql`select payload, headers, error_detail from integration.consumer_inbox where inbox_id = ${finished!.inbox_id}`).toEqual(
      [{ payload: {}, headers: {}, error_detail: null }],
    );
  });

  it("cannot purge a row that is not finished (a queued row's payload is still to be processed)", async () => {
    const [queued] = await insertInboxRows(sql, [{ consumerName: 'case-sla' }]);
    expect(
      await outcome(
        DatabaseRoles.reaper,
        `update integration.consumer_inbox set payload_purged_at = now() where inbox_id = '${queued!.inbox_id}'`,
      ),
    ).toEqual({ code: '23514' });
  });
});

describe('the cross-consumer policies', () => {
  it("open every consumer's rows to the reaper and ops only, on every table a consumer role reaches by policy (0202)", async () => {
    const policies = await sql<{ table: string; roles: string[] }[]>`
      select format('%s.%s', schemaname, tablename) as table, roles::text[] as roles
      from pg_policies where policyname = 'every_consumer_rows' order by 1`;

    expect(policies.map((p) => p.table)).toEqual([
      'case_core.case_audit',
      'integration.consumed_events',
      'integration.consumer_inbox',
      'integration.consumer_lane',
      'integration.consumer_pause',
      'integration.consumer_raw_poison',
      'integration.consumer_worker_slot',
      'integration.outbox',
      'integration.outbox_lane',
    ]);
    for (const p of policies) expect([p.table, [...p.roles].sort()]).toEqual([p.table, ['inbox_ops', 'inbox_reaper']]);
  });
});
