import { beforeEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRow, insertInboxRows, insertPoisonRow, type InboxStatus } from '../../helpers/factories';
import { opsDeps, opsError, run } from './support';
import { reap } from '../reaper/support';
import { DatabaseRoles } from '../../../functions/lib/database-roles';

const db = await useTestDatabase();
const deps = opsDeps(db.sql);
const TOPIC = 'regulatory.case.events.v1';

beforeEach(async () => {
  await db.sql`truncate integration.consumer_inbox, integration.consumer_raw_poison, integration.operator_audit, integration.consumed_events`;
});

const eventOf = (args: Record<string, unknown>) => run(deps, { command: 'event', ...args });
const whats = (story: { timeline: { what: string }[] }) => story.timeline.map((t) => t.what);

describe('event: one row in each status', () => {
  it.each<[InboxStatus, string | null, string[]]>([
    ['RECEIVED', null, ['received by case-projection']],
    ['RETRY_PENDING', 'DB_TRANSIENT', ['received by case-projection', 'next attempt due (DB_TRANSIENT)']],
    ['PROCESSED', null, ['received by case-projection', 'processed']],
    ['IGNORED', null, ['received by case-projection', 'ignored']],
    ['QUARANTINED', 'PAYLOAD_INVALID', ['received by case-projection', 'quarantined: PAYLOAD_INVALID']],
  ])('tells a %s row its story: status, attempts, times, last error', async (status, errorCode, moments) => {
    const row = await insertInboxRow(db.sql, {
      status,
      errorCode,
      attemptCount: 2,
      receivedSecondsAgo: 60,
      nextAttemptInSeconds: status === 'RETRY_PENDING' ? 30 : null,
    });
    if (errorCode !== null) {
      await db.sql`update integration.consumer_inbox set error_message = 'what went wrong' where inbox_id = ${row.inbox_id}`;
    }
    const [stored] = await db.sql`select * from integration.consumer_inbox where inbox_id = ${row.inbox_id}`;

    const { events, poison } = await eventOf({ consumer: 'case-projection', eventId: row.event_id });

    expect(poison).toEqual([]);
    expect(events).toHaveLength(1);
    const [story] = events;
    expect(story).toMatchObject({
      consumer: 'case-projection',
      inboxId: row.inbox_id,
      eventId: row.event_id,
      eventType: 'regulatory.case.accepted.v1',
      status,
      attempts: 2,
      lease: null,
      error: errorCode === null ? null : { code: errorCode, message: 'what went wrong' },
      times: {
        occurredAt: stored!.occurred_at,
        receivedAt: stored!.received_at,
        processedAt: stored!.processed_at,
        quarantinedAt: stored!.quarantined_at,
        nextAttemptAt: stored!.next_attempt_at,
      },
      kafka: { topic: TOPIC, partition: 0, offset: stored!.offset_no },
    });
    expect(whats(story)).toEqual(["occurred (case-command-service's clock)", ...moments]);
  });
});

describe('event: in flight', () => {
  it('names the lease owner and whether the lease has expired', async () => {
    const [live, stale] = await insertInboxRows(db.sql, [
      { status: 'PROCESSING', lockedBy: 'worker-a1', leaseExpiresInSeconds: 120 },
      { status: 'PROCESSING', lockedBy: 'worker-b2', leaseExpiresInSeconds: -5 },
    ]);

    const [liveStory] = (await eventOf({ consumer: 'case-projection', eventId: live!.event_id })).events;
    const [staleStory] = (await eventOf({ consumer: 'case-projection', eventId: stale!.event_id })).events;

    expect(liveStory.lease).toMatchObject({ owner: 'worker-a1', expired: false });
    expect(staleStory.lease).toMatchObject({ owner: 'worker-b2', expired: true });
    expect(whats(liveStory)).toContain('claimed by worker-a1 (attempt 1)');
    expect(whats(staleStory)).toContain('lease expired (the reaper returns it)');
  });
});

describe("event: the row's place in its aggregate", () => {
  it('shows the head, the open rows ahead of the row and behind it, and quarantined others', async () => {
    const versioned = (aggregateVersion: number, status: InboxStatus) => ({
      status,
      aggregateId: 'case_77',
      aggregateVersion,
      eventType: 'regulatory.case.status-changed.v1',
      payload: { caseId: 'case_77', newStatus: `S${aggregateVersion}` },
      errorCode: status === 'QUARANTINED' ? 'PAYLOAD_INVALID' : null,
    });
    // Arrival order differs from version order: the position follows versions.
    const [, v2, v3, ,] = await insertInboxRows(db.sql, [
      versioned(1, 'PROCESSED'),
      versioned(2, 'RETRY_PENDING'),
      versioned(3, 'RECEIVED'),
      versioned(5, 'QUARANTINED'),
      versioned(4, 'RECEIVED'),
    ]);

    const [middle] = (await eventOf({ consumer: 'case-projection', eventId: v3!.event_id })).events;
    const [head] = (await eventOf({ consumer: 'case-projection', eventId: v2!.event_id })).events;

    expect(middle.aggregate).toEqual({
      type: 'case',
      id: 'case_77',
      version: 3,
      head: { inboxId: v2!.inbox_id, eventId: v2!.event_id, status: 'RETRY_PENDING', version: 2 },
      isHead: false,
      openAhead: 1,
      openBehind: 1,
      quarantinedOthers: 1,
    });
    expect(head.aggregate).toMatchObject({ isHead: true, openAhead: 0, openBehind: 2 });
  });
});

describe('event: operator actions', () => {
  it('lists the replay that touched the row, with who and why, and not the dry run', async () => {
    const row = await insertInboxRow(db.sql, { status: 'QUARANTINED', errorCode: 'MAX_ATTEMPTS_EXCEEDED' });
    await run(deps, { command: 'replay', ids: [row.inbox_id], dryRun: true });
    const { auditId } = await run(deps, { command: 'replay', ids: [row.inbox_id], reason: 'database back' });

    const [story] = (await eventOf({ consumer: 'case-projection', eventId: row.event_id })).events;

    expect(story.status).toBe('RETRY_PENDING');
    expect(story.actions).toEqual([
      expect.objectContaining({ audit_id: auditId, action: 'replay', actor: 'alice', reason: 'database back', affected_count: 1 }),
    ]);
    expect(whats(story)).toContain(`replayed by alice: database back (audit ${auditId})`);
  });
});

describe('event: by Kafka offset', () => {
  it("finds the poison row of a poisoned offset next to the other consumer's inbox row of the same record", async () => {
    const offset = 9_000_001;
    const sla = await insertInboxRow(db.sql, { consumerName: 'case-sla', partition: 3, offset, status: 'PROCESSED' });
    const { poison_id } = await insertPoisonRow(db.sql, {
      consumerName: 'case-projection',
      partition: 3,
      offset,
      errorCode: 'ENVELOPE_INVALID',
    });
    // Another partition's same offset is another record.
    await insertPoisonRow(db.sql, { consumerName: 'case-projection', partition: 4, offset });

    const result = await eventOf({ topic: TOPIC, partition: 3, offset });

    expect(result.events.map((e: { consumer: string; inboxId: string }) => [e.consumer, e.inboxId])).toEqual([['case-sla', sla.inbox_id]]);
    expect(result.poison).toEqual([
      expect.objectContaining({
        poison_id,
        consumer_name: 'case-projection',
        partition_no: 3,
        offset_no: offset,
        error_code: 'ENVELOPE_INVALID',
      }),
    ]);
    expect(result.poison[0]).not.toHaveProperty('raw_value');
    const projectionOnly = await eventOf({ topic: TOPIC, partition: 3, offset, consumer: 'case-projection' });
    expect(projectionOnly.events).toEqual([]);
    expect(projectionOnly.poison.map((p: { poison_id: string }) => p.poison_id)).toEqual([poison_id]);
  });

  it('tells a row re-ingested from poison where it came from', async () => {
    const row = await insertInboxRow(db.sql, { offset: 9_000_002, receivedSecondsAgo: 10 });
    const { poison_id } = await insertPoisonRow(db.sql, { offset: 9_000_002, errorCode: 'ENVELOPE_INVALID', createdSecondsAgo: 3600 });
    await db.sql`update integration.consumer_raw_poison set resolved_at = now(), resolved_inbox_id = ${row.inbox_id}, resolved_by = 'bob'`;

    const [story] = (await eventOf({ eventId: row.event_id })).events;

    expect(story.poisonIds).toEqual([poison_id]);
    expect(whats(story).slice(1, 3)).toEqual([`poisoned: ENVELOPE_INVALID (poison ${poison_id})`, 'received by case-projection']);
  });
});

describe('event: after the row left the inbox', () => {
  it('tells what the kept key says: status, times, offset, resolve, until when a redelivery is a duplicate', async () => {
    const row = await insertInboxRow(db.sql, { status: 'QUARANTINED', errorCode: 'PAYLOAD_INVALID', offset: 9_100_001 });
    await run(deps, { command: 'resolve', ids: [row.inbox_id], reason: 'producer bug' });
    // Nine days later.
    await db.sql`
      update integration.consumer_inbox
      set received_at = now() - interval '10 days', quarantined_at = now() - interval '10 days' + interval '1 second',
          processed_at = now() - interval '9 days'
      where inbox_id = ${row.inbox_id}`;
    await db.sql`update integration.operator_audit set created_at = now() - interval '9 days' - interval '1 second'`;
    expect((await reap(db.as(DatabaseRoles.reaper))).payloadsPurged).toBe(1);

    const { events, left } = await eventOf({ eventId: row.event_id });

    expect(events).toEqual([]);
    expect(left).toHaveLength(1);
    const [key] = await db.sql`select * from integration.consumed_events where inbox_id = ${row.inbox_id}`;
    expect(left[0]).toMatchObject({
      consumer: 'case-projection',
      inboxId: row.inbox_id,
      eventId: row.event_id,
      status: 'IGNORED',
      errorCode: 'OPERATOR_RESOLVED',
      kafka: { topic: TOPIC, partition: 0, offset: 9_100_001 },
      times: { receivedAt: key!.received_at, processedAt: key!.processed_at, quarantinedAt: key!.quarantined_at },
      dedupeUntil: key!.dedupe_until,
    });
    expect(left[0].actions.map((a: { action: string }) => a.action)).toEqual(['resolve']);
    expect(whats(left[0])).toEqual([
      'received by case-projection',
      'quarantined',
      expect.stringMatching(/^resolved by .+: producer bug/),
      'ignored',
      'dedupe window ends: a redelivery is new after this',
    ]);
  });
});

describe('event: across consumers', () => {
  it('tells each consumer of the topic its own story when no consumer is named', async () => {
    const eventId = 'evt_shared_1';
    const [projection, sla] = await insertInboxRows(db.sql, [
      { eventId, status: 'PROCESSED' },
      { eventId, consumerName: 'case-sla', status: 'IGNORED' },
    ]);

    const all = await eventOf({ eventId });
    const one = await eventOf({ eventId, consumer: 'case-sla' });

    expect(all.events.map((e: { consumer: string; inboxId: string; status: string }) => [e.consumer, e.inboxId, e.status])).toEqual([
      ['case-projection', projection!.inbox_id, 'PROCESSED'],
      ['case-sla', sla!.inbox_id, 'IGNORED'],
    ]);
    expect(one.events.map((e: { inboxId: string }) => e.inboxId)).toEqual([sla!.inbox_id]);
  });
});

describe('event: payloads', () => {
  it('carries no payload or headers unless asked for', async () => {
    const row = await insertInboxRow(db.sql, {
      payload: { caseId: 'case_secret_42', acceptedAt: '2026-07-03T09:15:30Z' },
      headers: { h: 'v' },
    });

    const plain = await eventOf({ eventId: row.event_id });
    const full = await eventOf({ eventId: row.event_id, includePayload: true });

    expect(plain.events[0]).not.toHaveProperty('payload');
    expect(plain.events[0]).not.toHaveProperty('headers');
    expect(JSON.stringify(plain)).not.toContain('2026-07-03T09:15:30Z"}');
    expect(full.events[0]).toMatchObject({ payload: { caseId: 'case_secret_42' }, headers: { h: 'v' } });
  });
});

describe('event: refusals', () => {
  it('answers NOT_FOUND when neither the inbox nor poison knows the record', async () => {
    const error = await opsError(eventOf({ eventId: 'evt_nobody' }), 'NOT_FOUND');
    expect(error.message).toContain('case-projection, case-sla, notification-service');
    await opsError(eventOf({ topic: TOPIC, partition: 0, offset: 1 }), 'NOT_FOUND');
  });

  it('refuses a half-given offset, two ways at once, and an unknown consumer', async () => {
    await opsError(eventOf({ topic: TOPIC, partition: 0 }), 'BAD_ARGUMENTS');
    await opsError(eventOf({ eventId: 'e', offset: 3 }), 'BAD_ARGUMENTS');
    await opsError(eventOf({ topic: TOPIC, partition: -1, offset: 0 }), 'BAD_ARGUMENTS');
    await opsError(eventOf({ eventId: 'e', consumer: 'nobody' }), 'UNKNOWN_CONSUMER');
  });
});
