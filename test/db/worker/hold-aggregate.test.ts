/**
 * Quarantine policy hold-aggregate (the case consumers ship with it): a QUARANTINED row
 * holds the rest of its aggregate, unclaimed and with no attempt spent, until an operator
 * replays or resolves it; the gauges count what is held. Policy continue does not hold.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CASE_STATUS_CHANGED, caseProjection } from '../../../functions/consumers/case-projection';
import { defineHandler, type ConsumerDeclaration } from '../../../functions/framework';
import { readGauges } from '../../../functions/inbox/gauges';
import { replayQuarantined } from '../../../functions/ops/queries/replay';
import { resolveQuarantined } from '../../../functions/ops/queries/resolve';
import { NonRetryableError } from '../../../functions/lib/errors';
import { DatabaseRoles, workerRoleOf } from '../../../functions/lib/database-roles';
import { useTestDatabase } from '../../helpers/db';
import { insertInboxRows, type InboxRowSpec } from '../../helpers/factories';
import { opsDeps, run } from '../ops/support';
import { createAppliedTable, variant, work } from './support';

const db = await useTestDatabase();
const sql = db.sql;

await createAppliedTable(sql, 'note_applied', workerRoleOf(caseProjection));
// The code under test runs as its function's role; the arrangement as the owner.
const asWorker = db.as(workerRoleOf(caseProjection));
const asReaper = db.as(DatabaseRoles.reaper);
const asOps = db.as(DatabaseRoles.ops);

beforeEach(async () => {
  await sql`truncate integration.consumer_inbox, read_model.case_summary, public.note_applied`;
});

const NOTE = 'test.note.v1';

function withNotes(policy: ConsumerDeclaration['quarantinePolicy']): ConsumerDeclaration {
  return {
    ...variant(caseProjection, {
      handlers: {
        [NOTE]: {
          1: defineHandler({
            payload: z.object({ broken: z.boolean().optional() }),
            async handle(tx, event) {
              if (event.payload.broken) throw new NonRetryableError('NOTE_BROKEN', 'never works');
              await tx`insert into public.note_applied (aggregate_id, event_id) values (${event.aggregateId}, ${event.eventId})`;
            },
          }),
        },
      },
    }),
    quarantinePolicy: policy,
  };
}

const note = (aggregateId: string, seconds: number, payload: Record<string, unknown> = {}): InboxRowSpec => ({
  aggregateId,
  eventType: NOTE,
  payload,
  receivedSecondsAgo: seconds,
});

function statusChanged(caseId: string, version: number, extra: Partial<InboxRowSpec> = {}): InboxRowSpec {
  return {
    aggregateId: caseId,
    aggregateVersion: version,
    eventType: CASE_STATUS_CHANGED,
    payload: { caseId, newStatus: `S${version}` },
    ...extra,
  };
}

async function states(aggregateId: string) {
  return sql<{ aggregate_version: number | null; status: string; attempt_count: number }[]>`
    select aggregate_version, status, attempt_count from integration.consumer_inbox
    where aggregate_id = ${aggregateId} order by aggregate_version nulls last, received_at`;
}

const operator = { actor: 'test-operator', reason: 'fixed upstream', source: 'cli' as const, limit: 10 };

describe('quarantine policy hold-aggregate', () => {
  it('the case consumers ship with it', () => {
    expect(caseProjection.quarantinePolicy).toBe('hold-aggregate');
  });

  it('a quarantined v3 holds v4..v6 without spending their attempts; replaying v3 releases them in order', async () => {
    await sql`insert into read_model.case_summary (case_id, case_status, last_aggregate_version) values ('case_h', 'S2', 2)`;
    // v3 has used its whole attempt budget: the claim's attempt is one too many.
    const [v3] = await insertInboxRows(sql, [
      statusChanged('case_h', 3, { attemptCount: caseProjection.retry.maxAttempts }),
      statusChanged('case_h', 4),
      statusChanged('case_h', 5),
      statusChanged('case_h', 6),
    ]);

    const first = await work(asWorker, caseProjection);
    const again = await work(asWorker, caseProjection);

    expect(first).toMatchObject({ quarantined: 1, processed: 0, released: 3 });
    expect(again).toMatchObject({ claimed: 0 });
    expect((await states('case_h')).map((r) => [r.aggregate_version, r.status, r.attempt_count])).toEqual([
      [3, 'QUARANTINED', caseProjection.retry.maxAttempts + 1],
      [4, 'RECEIVED', 0],
      [5, 'RECEIVED', 0],
      [6, 'RECEIVED', 0],
    ]);
    const [gauges] = await readGauges(asReaper, ['case-projection']);
    expect(gauges).toMatchObject({ quarantine_depth: 1, held_aggregates: 1, held_depth: 3 });
    const { held } = await run(opsDeps(asOps), { command: 'stats', consumer: 'case-projection' });
    expect(held).toEqual([
      expect.objectContaining({ aggregate_id: 'case_h', inbox_id: v3!.inbox_id, error_code: 'MAX_ATTEMPTS_EXCEEDED', behind: 3 }),
    ]);

    await replayQuarantined(asOps, { ...operator, selection: { inboxIds: [v3!.inbox_id] } });
    const after = await work(asWorker, caseProjection);

    expect(after).toMatchObject({ processed: 4, quarantined: 0, retried: 0 });
    expect((await states('case_h')).map((r) => r.status)).toEqual(['PROCESSED', 'PROCESSED', 'PROCESSED', 'PROCESSED']);
    const [summary] = await sql<
      { v: number }[]
    >`select last_aggregate_version::int as v from read_model.case_summary where case_id = 'case_h'`;
    expect(summary!.v).toBe(6);
    const [released] = await readGauges(asReaper, ['case-projection']);
    expect(released).toMatchObject({ held_aggregates: 0, held_depth: 0 });
  });

  it('resolving the quarantined row releases what it holds, in order', async () => {
    const consumer = withNotes('hold-aggregate');
    const [broken, a, b] = await insertInboxRows(sql, [note('agg_r', 30, { broken: true }), note('agg_r', 20), note('agg_r', 10)]);
    expect(await work(asWorker, consumer)).toMatchObject({ quarantined: 1, processed: 0 });
    expect(await work(asWorker, consumer)).toMatchObject({ claimed: 0 });

    await resolveQuarantined(asOps, { ...operator, selection: { inboxIds: [broken!.inbox_id] } });
    expect(await work(asWorker, consumer)).toMatchObject({ processed: 2 });

    const applied = await sql<{ event_id: string }[]>`select event_id from public.note_applied where aggregate_id = 'agg_r' order by seq`;
    expect(applied.map((r) => r.event_id)).toEqual([a!.event_id, b!.event_id]);
    expect((await states('agg_r')).map((r) => r.status)).toEqual(['IGNORED', 'PROCESSED', 'PROCESSED']);
  });

  it('rows arriving behind a hold wait too; other aggregates are not held', async () => {
    const consumer = withNotes('hold-aggregate');
    await insertInboxRows(sql, [note('agg_held', 30, { broken: true }), note('agg_free', 20)]);
    await work(asWorker, consumer);

    await insertInboxRows(sql, [note('agg_held', 0), note('agg_free', 0)]);
    const result = await work(asWorker, consumer);

    expect(result).toMatchObject({ processed: 1 });
    expect((await states('agg_held')).map((r) => r.status)).toEqual(['QUARANTINED', 'RECEIVED']);
    expect((await states('agg_free')).map((r) => r.status)).toEqual(['PROCESSED', 'PROCESSED']);
  });

  it('policy continue: the rows behind a quarantined one go on', async () => {
    const consumer = withNotes('continue');
    await insertInboxRows(sql, [note('agg_c', 30, { broken: true }), note('agg_c', 20)]);

    expect(await work(asWorker, consumer)).toMatchObject({ quarantined: 1, processed: 1 });
    const [gauges] = await readGauges(asReaper, ['case-projection']);
    expect(gauges).toMatchObject({ held_aggregates: 0, held_depth: 0 });
  });
});
