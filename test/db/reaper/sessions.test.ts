/**
 * A consumer's role cannot hold the database past the bound: a session of one whose
 * transaction began more than the bound ago (a statement that lifted its own timeout, a
 * transaction left open) is ended by the reaper's next pass, reported by a log line and a
 * metric (migrations/0201_end_overrunning_sessions.sql; docs/reaper.md).
 */
import { describe, expect, it, vi } from 'vitest';
import { caseProjection } from '../../../functions/consumers/case-projection';
import { caseSla } from '../../../functions/consumers/case-sla';
import { DatabaseRoles, relayRoleOf, workerRoleOf } from '../../../functions/lib/database-roles';
import { MetricNames } from '../../../functions/lib/metric-names';
import type { ReaperLogger } from '../../../functions/reaper/reaper';
import { useTestDatabase } from '../../helpers/db';
import { MetricsRecorder, reap } from './support';

const db = await useTestDatabase();
const BOUND_SECONDS = 1;
const reaperConfig = { reaper: { batchSize: 100, safetyMarginMs: 0, sessionBoundSeconds: BOUND_SECONDS } };

/** Log lines as the reaper wrote them. */
function recordingLogger(): ReaperLogger & { lines: { message: string; extra: Record<string, unknown> }[] } {
  const lines: { message: string; extra: Record<string, unknown> }[] = [];
  const record = (message: string, extra?: unknown) => lines.push({ message, extra: (extra ?? {}) as Record<string, unknown> });
  return { lines, info: record, warn: record } as unknown as ReaperLogger & { lines: typeof lines };
}

/** Wait until `role` has a session whose transaction is older than the bound. */
async function pastTheBound(role: string): Promise<void> {
  await vi.waitFor(
    async () => {
      const [row] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where usename = ${role} and datname = current_database()
          and xact_start < clock_timestamp() - make_interval(secs => ${BOUND_SECONDS + 0.5})`;
      expect(row!.n).toBe(1);
    },
    { timeout: 15_000, interval: 100 },
  );
}

describe('consumer sessions past the bound', () => {
  it("ends a consumer role's statement that lifted its own timeout, and a transaction left open, on the next pass", async () => {
    const worker = workerRoleOf(caseProjection);
    const relay = relayRoleOf(caseSla);
    // A handler that lifts its statement timeout and sleeps; a relay role that leaves a transaction open.
    const sleeper = db.client({ role: worker, max: 1 });
    const sleeping = sleeper
      .begin(async (tx) => {
        await tx`set local statement_timeout = 0`;
        await tx`select pg_sleep(120)`;
      })
      .then(
        () => 'finished',
        (error: { code?: string }) => error.code,
      );
    const holder = await db.client({ role: relay, max: 1 }).reserve();
    await holder`begin`;
    await holder`select count(*) from integration.outbox`;
    // Left alone: a consumer role's kept connection (idle, no transaction), and another
    // function's long transaction.
    const idle = db.client({ role: workerRoleOf(caseSla), max: 1 });
    await idle`select 1`;
    const ops = db.client({ role: DatabaseRoles.ops, max: 1 });
    const opsWorking = ops.begin((tx) => tx`select pg_sleep(${BOUND_SECONDS + 3})`);
    await pastTheBound(worker);
    await pastTheBound(relay);

    const metrics = new MetricsRecorder();
    const logger = recordingLogger();
    const result = await reap(db.as(DatabaseRoles.reaper), { config: reaperConfig, metrics, logger });

    // Terminated: the server's 57P01 (admin_shutdown), or the closed connection that follows it.
    expect(['57P01', 'CONNECTION_CLOSED']).toContain(await sleeping);
    expect(['57P01', 'CONNECTION_CLOSED']).toContain(
      await holder`select 1`.then(
        () => 'open',
        (error: { code?: string }) => error.code,
      ),
    );
    expect(
      await db.sql`select usename from pg_stat_activity where usename in (${worker}, ${relay}) and datname = current_database()`,
    ).toEqual([]);
    expect(result.sessionsEnded).toBe(2);
    expect(metrics.value(caseProjection.name, MetricNames.ConsumerSessionsEnded)).toBe(1);
    expect(metrics.value(caseSla.name, MetricNames.ConsumerSessionsEnded)).toBe(1);
    const ended = logger.lines.filter((l) => l.message === 'consumer session past the bound: ended').map((l) => l.extra);
    expect(ended.map((e) => [e.consumerName, e.role, e.ended]).sort()).toEqual([
      [caseProjection.name, worker, true],
      [caseSla.name, relay, true],
    ]);
    // Identifiers only: never the statement the session ran.
    expect(JSON.stringify(ended)).not.toMatch(/pg_sleep|outbox/);

    expect(await idle`select 1 as ok`).toEqual([{ ok: 1 }]);
    await expect(opsWorking).resolves.toBeDefined();
    // The reaper's own result keeps its contract: the counts a pass returns.
    expect(result).toMatchObject({ released: 0, quarantined: 0, purged: 0 });
  });

  it('leaves a consumer session whose transaction is within the bound', async () => {
    const worker = workerRoleOf(caseProjection);
    const working = db.client({ role: worker, max: 1 }).begin((tx) => tx`select pg_sleep(2)`);
    await vi.waitFor(async () => {
      const [row] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where usename = ${worker} and state = 'active' and datname = current_database()`;
      expect(row!.n).toBe(1);
    });

    const result = await reap(db.as(DatabaseRoles.reaper), {
      config: { reaper: { batchSize: 100, safetyMarginMs: 0, sessionBoundSeconds: 60 } },
    });

    expect(result.sessionsEnded).toBe(0);
    await expect(working).resolves.toBeDefined();
  });
});
