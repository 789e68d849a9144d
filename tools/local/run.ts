/**
 * runLocal(): the whole system on one machine, end to end through the real functions.
 *
 *   database      an embedded PostgreSQL (or the one given), migrated by the one runner;
 *                 each function connects as its own database role (tools/database-roles.ts)
 *   stream        tools/local/generator.ts: case events and payments, with duplicates,
 *                 poison, contract violations, out-of-order versions and a fault plan
 *   ingest        the real ingest handler of each consumer (createIngestHandler), fed by a
 *                 simulated MSK event-source mapping per consumer and topic (mapping.ts);
 *                 some invocations get a client whose database is unreachable
 *   worker        the real worker invocation (functions/worker/invocation.ts, what the
 *                 Lambda handler runs), on a simulated Lambda service (lambda.ts): invoked
 *                 asynchronously by a simulated scheduler every `tickMs` (EventBridge
 *                 Scheduler's rate(1 minute), accelerated unless --tick-ms 60000 or --rate),
 *                 by the ingest functions' wake-ups and by its own fan-out and hand-over,
 *                 their InvokeCommands sent through a LambdaClient the service answers; at
 *                 most `workers` awake per consumer (its slots); plus simulated crashes: a
 *                 claim under a short lease that is never completed
 *   reaper        the real runOnce every `tickMs`
 *   steady load   with --rate, the stream is produced over --duration seconds as a
 *                 producer would write it, and the summary's latency is received → processed
 *   faults        the consumer declarations wrapped by faults.ts (no production code changed)
 *
 * It ends when every mapping has committed every offset and every inbox row is final (or
 * at the timeout), then checks the invariants (checks.ts), prints a summary per consumer and
 * writes the HTML report (html-report.ts) from the metrics the functions emitted. When the
 * caller's signal aborts (Ctrl-C), it stops where it is, prints what ran so far and writes
 * the report, without checks.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CONSUMERS } from '../../functions/consumers';
import type { KafkaEvent } from '../../functions/ingest/types';
import type { ConsumerDeclaration } from '../../functions/framework/types';
import { provisionConsumerRoles } from '../../functions/inbox/consumer-roles';
import { claimDue } from '../../functions/inbox/claim-due';
import { createWorkerInvocation } from '../../functions/worker/invocation';
import { inboxStatusCounts, poisonCounts } from '../../functions/inbox/stats';
import { createIngestHandler } from '../../functions/ingest/ingest';
import { parseConfig, type Config } from '../../functions/lib/config';
import { createSql, type Sql } from '../../functions/lib/db';
import { loadMigrations, migrate, MIGRATIONS_DIR } from '../../functions/lib/migrate';
import { MetricNames } from '../../functions/lib/metric-names';
import { runOnce } from '../../functions/reaper/reaper';
import { DatabaseRoles, ingestRoleOf, workerRoleOf, type DatabaseRole } from '../../functions/lib/database-roles';
import { prepareRoleLogins, roleUrl } from '../database-roles';
import { freePort, startEmbeddedPostgres } from '../embedded-postgres';
import { runChecks, type CheckResult } from './checks';
import { ExitCode } from './exit-codes';
import { prepareLedger, withFaults } from './faults';
import { generateStream, TOPIC_CONSUMERS, type GeneratedStream } from './generator';
import { writeReport } from './html-report';
import { describeValueFormat, useValueFormat } from './value-format';
import { SimulatedLambda } from './lambda';
import { SimulatedMapping } from './mapping';
import { keyedDraw } from './random';
import { CapturingMetrics, fileSink, MetricLog, nullSink, SinkLogger, type LogSink } from './observability';
import { localRelay, relayChecks, SimulatedTopics } from './relay';
import { DEFAULT_OPTIONS, type LocalOptions } from './options';
import { PauseDrill } from './pause-drill';
import { LOCAL_SCHEDULE_GROUP, SimulatedScheduler } from './scheduler';
import {
  checksReport,
  latencyTable,
  Progress,
  summaryTable,
  type ConsumerLatency,
  type ConsumerSummary,
  type Output,
  type ProgressSnapshot,
} from './report';
import { buildTimeline, percentile, type FaultEvent, type FaultKind } from './timeline';

export interface RunLocalIO {
  /** An existing (empty) database; an embedded PostgreSQL is started when absent. */
  databaseUrl?: string;
  out?: Output;
  /** Rewrite one progress line in place (a terminal) rather than print periodic lines. */
  tty?: boolean;
  /** Aborted (Ctrl-C): stop, print what ran so far, write the report, skip the checks. */
  signal?: AbortSignal;
}

export interface WorkerSummary {
  consumer: string;
  /** Invocations of its worker function that started. */
  invocations: number;
  /** Sent by the ingest functions, by workers fanning out, by workers handing over at the end of their budget. */
  wokenByIngest: number;
  fannedOut: number;
  handedOver: number;
  wakeUpFailures: number;
  /** Invocations that found every slot held and returned at once. */
  noSlot: number;
  /** Invocations that found the consumer paused and returned at once. */
  paused: number;
  /** Invocations sent by ops resume (the pause drill). */
  resumed: number;
  peakConcurrency: number;
  /** Invocations that waited for the function's reserved concurrency; dropped for their age. */
  throttled: number;
  expired: number;
}

export interface LocalRunResult {
  ok: boolean;
  /** 0 every check passed; 1 otherwise: a check failed, or the run was interrupted (see `interrupted`). */
  exitCode: typeof ExitCode.passed | typeof ExitCode.failed;
  /** The caller's signal stopped the run before it settled; no checks ran. */
  interrupted: boolean;
  checks: CheckResult[];
  consumers: ConsumerSummary[];
  /** Received → processed per consumer, from the ProcessingLatency values the workers emitted. */
  latency: ConsumerLatency[];
  /** How each consumer's worker was invoked, and by whom. */
  workers: WorkerSummary[];
  stream: GeneratedStream['counts'];
  elapsedMs: number;
  /** The HTML report written, when the run got far enough to have one. */
  reportFile?: string;
  /** With options.keep: the database, still running (the owner's URL, and inbox_ops's for `npm run ops`). stop() ends an embedded one. */
  kept?: { url: string; opsUrl: string; embedded: boolean; stop(): Promise<void> };
}

/**
 * One invocation's budget, as the worker and reaper see it (the worker function's timeout;
 * 120 s in AWS). A worker stays awake until nothing has been due for its idle interval, so
 * under steady load it runs out its budget and hands over; the budget must leave room for
 * the safety margin and for leases long enough to outlast a batch on a busy machine.
 */
const INVOCATION_MS = 30_000;
const OBSERVE_MS = 200;
/**
 * The progress counts read the whole inbox (every status of every row): once a second, not
 * at every look. A 40,000-event run's inbox holds 77,000 rows, and counting them five times
 * a second took a third of the database's time from the system under test.
 */
const COUNT_MS = 1_000;
const CRASH_LEASE_SECONDS = 2;
const CRASH_CLAIM_LIMIT = 20;
/** How often a planned crash looks for rows to abandon, while the consumer's workers wait for it. */
const CRASH_POLL_MS = 20;
/** The worker function's asynchronous invocation config in AWS (cdk/constructs/consumer-worker.ts). */
const MAX_EVENT_AGE_MS = 60_000;

/** Whether any inbox row is still open (queued or in flight): the first entry of the open-row index. */
async function anyOpenRow(admin: Sql): Promise<boolean> {
  const rows = await admin`
    select 1 from integration.consumer_inbox
    where status in ('RECEIVED', 'RETRY_PENDING', 'PROCESSING')
    order by consumer_name collate "C", aggregate_type collate "C", aggregate_id collate "C"
    limit 1`;
  return rows.length > 0;
}

/** The simulated worker function of a consumer, and its schedule. */
const workerFunctionOf = (consumer: string) => `local-worker-${consumer}`;
const workerScheduleOf = (consumer: string) => `local-worker-schedule-${consumer}`;
/** The consumer the pause drill pauses: deferred, and not the one the relay publishes for. */
const PAUSED_CONSUMER = 'case-sla';

const plural = (n: number, word: string, words = `${word}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? word : words}`;

/** The caller's signal aborted the run before its stream started: nothing to summarize. */
class InterruptedBeforeStart extends Error {}

export class DatabaseNotEmptyError extends Error {
  constructor(what: string) {
    super(
      `the database already holds ${what}; the run's checks compare every row with what it generated, so it needs an empty, ` +
        'migrated database: unset DATABASE_URL to use an embedded PostgreSQL, or point it at a fresh database',
    );
    this.name = 'DatabaseNotEmptyError';
  }
}

async function assertEmpty(sql: Sql): Promise<void> {
  const [row] = await sql<{ inbox: boolean; poison: boolean; domain: boolean }[]>`
    select exists (select 1 from integration.consumer_inbox) as inbox,
           exists (select 1 from integration.consumer_raw_poison) as poison,
           exists (select 1 from read_model.case_summary)
             or exists (select 1 from case_core.sla_obligation)
             or exists (select 1 from public.notification_jobs) as domain`;
  if (row!.inbox) throw new DatabaseNotEmptyError('inbox rows');
  if (row!.poison) throw new DatabaseNotEmptyError('poison rows');
  if (row!.domain) throw new DatabaseNotEmptyError('domain rows (case_summary, sla_obligation or notification_jobs)');
}

/** The functions' configuration, built from an explicit record as each function's environment would be. */
function configFor(url: string, options: LocalOptions): Config {
  return parseConfig({
    DATABASE_URL: url,
    DB_SSL: 'disable',
    DB_POOL_MAX: '4',
    DB_CONNECT_TIMEOUT_SECONDS: '2',
    WORKER_BATCH_SIZE: '100',
    WORKER_SAFETY_MARGIN_MS: '3000',
    WORKER_MAX_CONCURRENCY: String(options.workers),
    WAKE_UPS: String(options.wakeUps),
    LEASE_SECONDS: '10',
    REAPER_SAFETY_MARGIN_MS: '3000',
    SERVICE_NAME: 'kafka-inbox-local',
  });
}

function describeStream(s: GeneratedStream, options: LocalOptions): string {
  const c = s.counts;
  return [
    `Stream (seed ${s.seed}): ${c.events.toLocaleString('en-US')} events — ${c.caseEvents} case events in ${s.cases.length} cases, ${c.payments} payments —`,
    `  plus ${c.duplicates} duplicates, ${c.poison} poison records, ${c.invalid} contract violations; ${c.outOfOrderCases} cases out of version order;`,
    `  ${c.faults} injected handler faults; ${options.partitions} partitions per topic.`,
    options.rate !== null
      ? `Steady load: ${options.rate.toLocaleString('en-US')} events/s for ${options.durationSeconds} s; schedule every ${options.tickMs.toLocaleString('en-US')} ms, batching window ${options.batchingWindowMs} ms; wake-ups ${options.wakeUps ? 'on' : 'OFF (the schedule alone starts workers)'}.`
      : `Schedule every ${options.tickMs.toLocaleString('en-US')} ms; wake-ups ${options.wakeUps ? 'on' : 'OFF (the schedule alone starts workers)'}.`,
    `Consumers: case-projection, case-sla ← regulatory.case.events.v1 (canonical, deferred); notification-service ← payment.completed (snake_case, inline).`,
  ].join('\n');
}

export async function runLocal(options: LocalOptions, io: RunLocalIO = {}): Promise<LocalRunResult> {
  const out: Output = io.out ?? { write: (t) => void process.stdout.write(t) };
  const tty = io.tty ?? false;
  const started = performance.now();
  const startedAt = Date.now();
  const aborted = () => io.signal?.aborted === true;
  const checkpoint = () => {
    if (aborted()) throw new InterruptedBeforeStart();
  };
  const clients: Sql[] = [];
  let sink: LogSink = nullSink;
  let stopEmbedded: (() => Promise<void>) | undefined;
  let keptResult: LocalRunResult['kept'];
  // Background loops (mappings, workers, reaper) stop on this flag, also when the run throws.
  let stopping = false;
  const background: Promise<unknown>[] = [];
  const stoppers: (() => void)[] = [];

  try {
    let url = io.databaseUrl;
    if (url === undefined) {
      out.write('Starting an embedded PostgreSQL… ');
      const t = performance.now();
      const db = await startEmbeddedPostgres();
      stopEmbedded = () => db.stop();
      url = db.url;
      out.write(`ready in ${((performance.now() - t) / 1000).toFixed(1)} s (port ${db.port}).\n`);
    }
    checkpoint();
    const config = configFor(url, options);
    const client = async (poolMax: number, overrides: Partial<Config['database']> = {}) => {
      const c = await createSql({ ...config.database, poolMax, ...overrides });
      clients.push(c);
      return c;
    };
    // The run's own client (migrations, observation, checks) is the owner; every function
    // connects as its own role, as in AWS, so a grant it lacks fails the run.
    const admin = await client(2);
    const migrated = await migrate(admin, await loadMigrations(MIGRATIONS_DIR));
    await provisionConsumerRoles(admin, CONSUMERS);
    out.write(`Migrations: ${migrated.applied.length} applied, ${migrated.alreadyApplied} already applied.\n`);
    await assertEmpty(admin);
    await prepareRoleLogins(admin, url);
    await prepareLedger(admin);
    const adminUrl = url;
    const as = (role: DatabaseRole, poolMax: number) => client(poolMax, { url: roleUrl(adminUrl, role) });
    checkpoint();

    const stream = generateStream(options);
    out.write(`${describeStream(stream, options)}\n`);
    const registry = options.valueFormat === 'json' ? undefined : await useValueFormat(stream, options.valueFormat);
    if (registry !== undefined) {
      background.push(new Promise<void>((resolve) => stoppers.push(() => void registry.close().then(resolve, resolve))));
    }
    out.write(`Case events: ${describeValueFormat(options.valueFormat)}${registry ? `, ${registry.encoded} records encoded` : ''}.\n`);
    if (options.logLevel !== 'SILENT') {
      sink = fileSink(options.logFile);
      out.write(`Function logs (${options.logLevel} and above, JSON): ${options.logFile}\n`);
    }
    out.write('\n');

    const metricLog = new MetricLog();
    const faults: FaultEvent[] = [];
    const fault = (kind: FaultKind, consumer: string) => faults.push({ time: Date.now(), kind, consumer });
    const logger = (component: string, consumerName?: string) =>
      new SinkLogger(sink, {
        serviceName: config.observability.serviceName,
        logLevel: options.logLevel,
        persistentKeys: { component, ...(consumerName ? { consumerName } : {}) },
      });
    const consumers = new Map<string, ConsumerDeclaration>(
      CONSUMERS.map((c) => [c.name, withFaults(c, stream.faults.get(c.name) ?? new Map())]),
    );
    const consumerNames = [...consumers.keys()];
    // The loops' waits end at once when the run stops: a schedule of 60 s must not hold up the end.
    const stopped = new AbortController();
    stoppers.push(() => stopped.abort());
    const pause = (ms: number) => sleep(ms, undefined, { signal: stopped.signal }).catch(() => {});
    // The Lambda service the workers run on, and the client the functions invoke them with.
    const lambdaService = new SimulatedLambda();
    const lambdaClient = lambdaService.client();
    // The workers' schedules, which ops pause and resume switch.
    const schedulerService = new SimulatedScheduler();
    // Running invocations see no time left and return; the run waits for them with the other loops.
    stoppers.push(() => background.push(lambdaService.stop()));
    // Steady load: the producer writes each record at its place on the stream's clock, replayed at the run's rate.
    const streamStartsAt = performance.now();
    const releasedAt =
      options.rate === null
        ? undefined
        : (timestamp: number) =>
            streamStartsAt + ((timestamp - stream.clock.startsAt) / stream.clock.spanMs) * options.durationSeconds * 1000;

    // Ingest: per consumer, the real handler on a working client and on an unreachable one.
    const unreachableUrl = `postgres://postgres@127.0.0.1:${await freePort()}/unreachable`;
    const mappings: { consumer: string; mapping: SimulatedMapping }[] = [];
    for (const [topic, names] of Object.entries(TOPIC_CONSUMERS)) {
      for (const name of names) {
        const consumer = consumers.get(name)!;
        const deps = {
          consumer,
          config,
          logger: logger('ingest', name),
          metrics: new CapturingMetrics(metricLog, name),
          ...(registry ? { schemaSource: registry.source } : {}),
        };
        const live = createIngestHandler({
          ...deps,
          sql: await as(ingestRoleOf(consumer), options.pollers),
          ...(options.wakeUps ? { wakeUp: { lambda: lambdaClient, functionName: workerFunctionOf(name) } } : {}),
        });
        const context = () => ({ awsRequestId: randomUUID() });
        // As the ingest handler does at the end of every invocation.
        const flushed = async <T>(invocation: Promise<T>): Promise<T> => {
          try {
            return await invocation;
          } finally {
            deps.metrics.publishStoredMetrics();
          }
        };
        // Each unreachable invocation gets a client of its own, as a container would that meets
        // the outage: one long-lived client would pile up postgres.js's reconnect backoff
        // (up to 20 s a connect after a few failures) and hold its partitions for that long,
        // so the mapping delivered nothing for tens of seconds while nothing was due.
        const unreachable = async (event: KafkaEvent) => {
          const sql = await createSql({ ...config.database, poolMax: 1, url: unreachableUrl, connectTimeoutSeconds: 1 });
          try {
            return await createIngestHandler({ ...deps, sql })(event, context());
          } finally {
            await sql.end({ timeout: 1 });
          }
        };
        mappings.push({
          consumer: name,
          mapping: new SimulatedMapping({
            consumerName: name,
            topic,
            partitions: stream.topics.get(topic)!,
            batchSize: options.batchSize,
            pollers: options.pollers,
            seed: options.seed,
            redeliveryRate: options.redeliveryRate,
            infraFailureRate: options.infraFailureRate,
            ...(releasedAt !== undefined ? { releasedAt, batchingWindowMs: options.batchingWindowMs } : {}),
            invoke: (event) => flushed(live(event, context())),
            invokeUnreachable: (event) => flushed(unreachable(event)),
            onFault: (kind) => fault(kind, name),
          }),
        });
      }
    }

    const deadline = started + options.timeoutSeconds * 1000;

    // A scheduled function's failed invocation is logged and the next tick tries again, as
    // EventBridge Scheduler would; it never ends the run.
    const invocationErrors = new Map<string, number>();
    const reportFailure = (what: string, log: SinkLogger) => (error: unknown) => {
      invocationErrors.set(what, (invocationErrors.get(what) ?? 0) + 1);
      log.error('invocation failed', { error: error instanceof Error ? error.message : String(error) });
    };
    const invokeSafely = async (what: string, log: SinkLogger, run: () => Promise<unknown>) => {
      try {
        await run();
      } catch (error) {
        reportFailure(what, log)(error);
      }
    };

    // Crashes: a worker of a deferred consumer claims rows under a short lease and dies
    // before completing them. The planned crashes go round-robin over the deferred
    // consumers; until a consumer's crash has happened the Lambda service holds its worker
    // invocations back, so the crash always finds rows to abandon however fast the machine
    // drains the backlog.
    const crashed = new Map<string, string[]>(consumerNames.map((c) => [c, []]));
    const crashTargets = consumerNames.filter((c) => consumers.get(c)!.mode === 'deferred');
    const pendingCrashes = new Map<string, number>(crashTargets.map((c) => [c, 0]));
    for (let n = 0; n < options.crashes && crashTargets.length > 0; n++) {
      const target = crashTargets[n % crashTargets.length]!;
      pendingCrashes.set(target, pendingCrashes.get(target)! + 1);
    }
    const pendingCrashTotal = () => [...pendingCrashes.values()].reduce((a, b) => a + b, 0);
    const crashPending = (name: string) => (pendingCrashes.get(name) ?? 0) > 0;
    const mappingsDoneFor = (name: string) => mappings.filter((m) => m.consumer === name).every((m) => m.mapping.done);
    // A crashed worker of each consumer connects as that consumer's worker role, as its function would.
    const crashSqls = new Map<string, Sql>();
    for (const name of consumers.keys()) crashSqls.set(name, await as(workerRoleOf({ name }), 1));
    let crashesHappened = 0;
    const crashOnce = async (name: string): Promise<void> => {
      const pending = pendingCrashes.get(name)!;
      const crashSql = crashSqls.get(name)!;
      const { rows } = await claimDue(crashSql, {
        consumerName: name,
        owner: `local-crashed-worker:${name}:${pending}`,
        limit: CRASH_CLAIM_LIMIT,
        leaseSeconds: CRASH_LEASE_SECONDS,
      });
      if (rows.length > 0) {
        crashed.get(name)!.push(...rows.map((r) => r.inbox_id));
        pendingCrashes.set(name, pending - 1);
        crashesHappened += 1;
        fault('worker-crash', name);
      } else if (mappingsDoneFor(name)) {
        // Everything delivered, and no row left that could still come due: there is nothing
        // to abandon (the check says so). Rows backing off are waited for.
        const [left] = await crashSql<{ n: number }[]>`
          select count(*)::int as n from integration.consumer_inbox
          where consumer_name = ${name} and status in ('RECEIVED', 'RETRY_PENDING')`;
        if (left!.n === 0) pendingCrashes.set(name, 0);
      }
    };
    for (const name of crashTargets) {
      background.push(
        (async () => {
          while (!stopping && crashPending(name)) {
            await invokeSafely(`crash ${name}`, logger('worker', name), () => crashOnce(name));
            if (crashPending(name)) await pause(CRASH_POLL_MS);
          }
        })(),
      );
    }

    /** Per consumer: worker invocations that found every slot held, or the consumer paused, and returned at once. */
    const idleInvocations = new Map<string, { count: number; paused: number; resumed: number }>();
    // Workers: one function per consumer on the simulated Lambda service, as in AWS: the
    // invocation handler the Lambda handler runs, its fan-out and hand-over invoking the
    // function itself through the same client.
    for (const [name, consumer] of consumers) {
      const functionName = workerFunctionOf(name);
      const log = logger('worker', name);
      const metrics = new CapturingMetrics(metricLog, name);
      const noSlot = { count: 0, paused: 0, resumed: 0 };
      idleInvocations.set(name, noSlot);
      const invoke = createWorkerInvocation({
        sql: await as(workerRoleOf(consumer), options.workers + 2),
        consumer,
        config,
        logger: log,
        metrics,
        self: { lambda: lambdaClient, functionName },
      });
      lambdaService.register({
        name: functionName,
        // As the worker handler does at the end of every invocation.
        handler: async (event, context) => {
          try {
            if ((event as { source?: unknown }).source === 'resume') noSlot.resumed += 1;
            const result = await invoke(event, context);
            if (result.stoppedBy === 'no-slot') noSlot.count += 1;
            if (result.stoppedBy === 'paused' && result.claimed === 0) noSlot.paused += 1;
            return result;
          } finally {
            metrics.publishStoredMetrics();
          }
        },
        // The CDK's default: the slots, plus one for an invocation that finds them all held.
        reservedConcurrency: options.workers + 1,
        timeoutMs: INVOCATION_MS,
        maxEventAgeMs: MAX_EVENT_AGE_MS,
        holdWhile: () => crashPending(name),
        onError: reportFailure(`worker ${name}`, log),
      });
      // The schedule: an asynchronous invocation every tick, while it is enabled. The run
      // starts at some point of the schedule's period, as it would against a schedule that
      // exists already: the first tick comes after a seeded fraction of the period, each
      // consumer's its own.
      schedulerService.add(workerScheduleOf(name), functionName);
      background.push(
        (async () => {
          await pause(Math.floor(keyedDraw(options.seed, 'schedule', name) * options.tickMs));
          while (!stopping) {
            if (schedulerService.enabled(workerScheduleOf(name))) lambdaService.invokeAsync(functionName, { source: 'schedule' });
            await pause(options.tickMs);
          }
        })(),
      );
    }

    // Reaper: one loop for all consumers.
    const reaped = new Map<string, number>(consumerNames.map((c) => [c, 0]));
    const reaperQuarantined = new Map<string, number>(consumerNames.map((c) => [c, 0]));
    const reaperSql = await as(DatabaseRoles.reaper, 1);
    const reaperLogger = logger('reaper');
    const reaperMetrics = new CapturingMetrics(metricLog);
    background.push(
      (async () => {
        while (!stopping) {
          const invocationEnds = performance.now() + INVOCATION_MS;
          await invokeSafely('reaper', reaperLogger, async () => {
            const result = await runOnce({
              sql: reaperSql,
              consumers: [...consumers.values()],
              config,
              logger: reaperLogger,
              metrics: reaperMetrics,
              remainingMs: () => Math.max(0, invocationEnds - performance.now()),
            });
            for (const c of result.consumers) {
              reaped.set(c.consumerName, (reaped.get(c.consumerName) ?? 0) + c.released + c.quarantined);
              reaperQuarantined.set(c.consumerName, (reaperQuarantined.get(c.consumerName) ?? 0) + c.quarantined);
            }
          });
          await pause(options.tickMs);
        }
      })(),
    );

    // Outbox relay: one loop, publishing to simulated topics (tools/local/relay.ts). It runs at
    // the quick run's cadence even under steady load (--tick-ms 60000): what --rate measures is
    // the workers' latency, and a relay ticking once a minute would only hold the run's end
    // (every obligation published, its two crashes taken over) for minutes.
    const topics = new SimulatedTopics({ seed: options.seed, refuseRate: 0.05 });
    const relay = localRelay({
      sql: await client(2),
      consumers: [...consumers.values()],
      config,
      logger: logger('relay'),
      metrics: new CapturingMetrics(metricLog),
      topics,
      tickMs: Math.min(options.tickMs, DEFAULT_OPTIONS.tickMs),
      invocationMs: INVOCATION_MS,
      crashes: 2,
      isStopping: () => stopping,
    });
    background.push(relay.run());

    for (const { mapping } of mappings) {
      stoppers.push(() => mapping.stop());
      background.push(mapping.run());
    }

    // The operator: pauses one deferred consumer mid-run with the real ops commands, then resumes it.
    const drill =
      options.pauseMs > 0 && consumers.has(PAUSED_CONSUMER)
        ? new PauseDrill({
            consumer: PAUSED_CONSUMER,
            pauseMs: options.pauseMs,
            admin,
            ops: {
              sql: await as(DatabaseRoles.ops, 2),
              scheduler: schedulerService.client(),
              lambda: lambdaClient,
              config: {
                scheduler: {
                  groupName: LOCAL_SCHEDULE_GROUP,
                  workerSchedules: Object.fromEntries(consumerNames.map((c) => [c, workerScheduleOf(c)])),
                },
                ingestMappings: {},
                workerFunctions: Object.fromEntries(consumerNames.map((c) => [c, workerFunctionOf(c)])),
                maxPayloadBytes: config.maxPayloadBytes,
              },
            },
            delivered: () => {
              const own = mappings.filter((m) => m.consumer === PAUSED_CONSUMER).map((m) => m.mapping);
              const total = own.reduce((n, m) => n + m.total, 0);
              return total === 0 ? 1 : 1 - own.reduce((n, m) => n + m.lag, 0) / total;
            },
            ready: () => !crashPending(PAUSED_CONSUMER),
            isStopping: () => stopping,
          })
        : undefined;
    if (drill !== undefined) background.push(drill.run().catch(reportFailure('pause drill', logger('ops'))));

    // Observe: progress, crashes, and the end of the run.
    const progress = new Progress(out, tty);
    let timedOut = false;
    let snapshot: ProgressSnapshot | undefined;
    let counted:
      { statuses: Awaited<ReturnType<typeof inboxStatusCounts>>; poison: Awaited<ReturnType<typeof poisonCounts>>; at: number } | undefined;
    for (;;) {
      // Settled? A cheap look first (has the open-row index an entry?); the counts that
      // confirm it are read at once, the others once a second.
      const mappingsDone = mappings.every((m) => m.mapping.done);
      const maybeSettled = mappingsDone && pendingCrashTotal() === 0 && !(await anyOpenRow(admin));
      if (counted === undefined || maybeSettled || performance.now() - counted.at >= COUNT_MS) {
        const [statuses, poison] = await Promise.all([inboxStatusCounts(admin), poisonCounts(admin)]);
        counted = { statuses, poison, at: performance.now() };
      }
      const { statuses, poison } = counted;
      const total = (pred: (s: (typeof statuses)[number]) => boolean) => statuses.filter(pred).reduce((n, s) => n + s.count, 0);
      const open = total((s) => s.status === 'RECEIVED' || s.status === 'RETRY_PENDING' || s.status === 'PROCESSING');
      const ms = mappings.map((m) => m.mapping.stats);
      snapshot = {
        elapsedMs: performance.now() - started,
        batches: ms.reduce((n, s) => n + s.batches, 0),
        records: ms.reduce((n, s) => n + s.records, 0),
        lag: mappings.reduce((n, m) => n + m.mapping.lag, 0),
        inboxRows: total(() => true),
        due: statuses.reduce((n, s) => n + s.due, 0),
        processing: total((s) => s.status === 'PROCESSING'),
        final: total((s) => s.status === 'PROCESSED' || s.status === 'IGNORED' || s.status === 'QUARANTINED'),
        quarantined: total((s) => s.status === 'QUARANTINED'),
        poison: poison.reduce((n, p) => n + p.total, 0),
        redelivered: ms.reduce((n, s) => n + s.redelivered, 0),
        infraFailures: ms.reduce((n, s) => n + s.infraFailures, 0),
        crashes: crashesHappened,
        reaped: [...reaped.values()].reduce((a, b) => a + b, 0),
      };
      progress.update(snapshot);

      if (maybeSettled && open === 0 && (await relay.settled())) break;
      if (aborted()) break;
      if (performance.now() > deadline) {
        timedOut = true;
        break;
      }
      await sleep(OBSERVE_MS);
    }

    stopping = true;
    for (const stop of stoppers) stop();
    await Promise.all(background);
    progress.finish({
      ...snapshot!,
      elapsedMs: performance.now() - started,
      crashes: crashesHappened,
      reaped: [...reaped.values()].reduce((a, b) => a + b, 0),
    });

    const interrupted = aborted();
    const total = (consumer: string, name: string) => metricLog.total(consumer, name);
    const summary: ConsumerSummary[] = consumerNames.map((name) => ({
      consumer: name,
      received: total(name, MetricNames.RecordsReceived),
      inserted: total(name, MetricNames.RecordsInserted),
      duplicates: total(name, MetricNames.RecordsDuplicate),
      poison: total(name, MetricNames.RecordsPoisoned),
      processed: total(name, MetricNames.EventsProcessed),
      retried: total(name, MetricNames.EventsRetried),
      quarantined: total(name, MetricNames.EventsQuarantined) + (reaperQuarantined.get(name) ?? 0),
      ignored: total(name, MetricNames.EventsIgnored),
      reaped: reaped.get(name) ?? 0,
    }));
    const workers: WorkerSummary[] = consumerNames.map((name) => {
      const st = lambdaService.stats(workerFunctionOf(name));
      return {
        consumer: name,
        invocations: st.started,
        wokenByIngest: total(name, MetricNames.WakeUpsSent),
        fannedOut: total(name, MetricNames.FanOutsSent),
        handedOver: total(name, MetricNames.HandOversSent),
        wakeUpFailures: total(name, MetricNames.WakeUpFailures),
        noSlot: idleInvocations.get(name)!.count,
        paused: idleInvocations.get(name)!.paused,
        resumed: idleInvocations.get(name)!.resumed,
        peakConcurrency: st.peakConcurrency,
        throttled: st.throttled,
        expired: st.expired,
      };
    });
    const latency: ConsumerLatency[] = consumerNames.map((name) => {
      const values = metricLog.values(name, MetricNames.ProcessingLatency).sort((a, b) => a - b);
      const at = (p: number) => (values.length === 0 ? null : percentile(values, p));
      return {
        consumer: name,
        rows: values.length,
        p50: at(50),
        p95: at(95),
        p99: at(99),
        max: values.at(-1) ?? null,
        inline: consumers.get(name)!.mode === 'inline',
      };
    });

    // An interrupted run has not settled: every check would fail for that alone.
    const checks = interrupted
      ? []
      : await runChecks(admin, stream, {
          consumers: consumerNames,
          lag: new Map(mappings.map((m) => [m.consumer, m.mapping.lag])),
          crashed,
          crashesRequested: options.crashes,
          reaped,
          ingestInserted: new Map(consumerNames.map((c) => [c, total(c, MetricNames.RecordsInserted)])),
          ingestPoisoned: new Map(consumerNames.map((c) => [c, total(c, MetricNames.RecordsPoisoned)])),
          timedOut,
        });
    if (!interrupted) checks.push(...(await relayChecks(admin, topics, relay.stats)));
    if (!interrupted && drill !== undefined) checks.push(await drill.check());
    const finalStates = await admin<{ consumer_name: string; status: string; error_code: string | null; n: number }[]>`
      select consumer_name, status, case when status = 'QUARANTINED' then error_code end as error_code, count(*)::int as n
      from integration.consumer_inbox
      group by 1, 2, 3
      order by 1, 2, 4 desc`;

    const ms = mappings.map((m) => m.mapping.stats);
    const sum = (f: (s: (typeof ms)[number]) => number) => ms.reduce((n, s) => n + f(s), 0);
    out.write(`\n${summaryTable(summary)}\n\n${latencyTable(latency)}\n\n`);
    out.write(
      `Mappings: ${plural(
        sum((s) => s.batches),
        'batch',
        'batches',
      )} of up to ${options.batchSize} records, ${plural(
        sum((s) => s.records),
        'record',
      )} delivered ` +
        `(${sum((s) => s.redelivered).toLocaleString('en-US')} of them again), ${plural(
          sum((s) => s.injectedRedeliveries),
          'commit',
        )} lost on purpose, ` +
        `${plural(
          sum((s) => s.infraFailures),
          'invocation',
        )} with the database unreachable → ${plural(
          sum((s) => s.reportedFailures),
          'partition',
        )} reported back ` +
        `and redelivered, ${plural(
          sum((s) => s.functionErrors),
          'function error',
        )}.\n`,
    );
    out.write(
      `Crashes: ${
        [...crashed.entries()]
          .filter(([, ids]) => ids.length > 0)
          .map(([c, ids]) => `${c} (${plural(ids.length, 'row')} abandoned)`)
          .join(', ') || 'none'
      }; ` + `their leases (${CRASH_LEASE_SECONDS} s) expired and the reaper returned them.\n`,
    );
    out.write(
      `Outbox relay: ${plural(relay.stats.invocations, 'invocation')}, ${plural(relay.stats.published, 'event')} published, ` +
        `${plural(relay.stats.refused, 'send')} refused and retried, crashes ${relay.stats.crashes.map((c) => `${c.kind} (${plural(c.rows, 'row')})`).join(', ') || 'none'}` +
        `${relay.stats.crashesNotSimulated > 0 ? ` (${relay.stats.crashesNotSimulated} planned, nothing to abandon)` : ''}.\n`,
    );
    out.write(
      `Workers (wake-ups ${options.wakeUps ? 'on' : 'off'}, at most ${options.workers} awake per consumer): ${workers
        .map(
          (w) =>
            `${w.consumer} ${plural(w.invocations, 'invocation')} (${w.wokenByIngest} woken by ingest, ${w.fannedOut} fanned out, ${w.handedOver} handed over, ` +
            `${w.resumed > 0 ? `${w.resumed} woken by ops resume, ` : ''}` +
            `${w.wakeUpFailures} wake-ups failed; ${w.noSlot} found every slot held${w.paused > 0 ? `, ${w.paused} found it paused` : ''}; ` +
            `at most ${w.peakConcurrency} running, ${w.throttled} throttled, ${w.expired} expired)`,
        )
        .join(' · ')}.\n`,
    );
    if (invocationErrors.size > 0) {
      out.write(
        `Failed invocations (retried on the next tick; see the log): ${[...invocationErrors].map(([w, n]) => `${w} ${n}`).join(', ')}.\n`,
      );
    }
    out.write(interrupted ? 'States so far:\n' : 'Final states:\n');
    for (const name of consumerNames) {
      const rows = finalStates.filter((r) => r.consumer_name === name);
      const parts = rows.map((r) => `${r.status}${r.error_code ? ` ${r.error_code}` : ''} ${r.n}`);
      out.write(`  ${name}: ${parts.join(' · ')}\n`);
    }
    if (!interrupted) out.write(`\nChecks:\n${checksReport(checks)}\n`);

    const failed = checks.filter((c) => !c.ok);
    const elapsedMs = performance.now() - started;
    const seconds = `${(elapsedMs / 1000).toFixed(1)} s`;
    const headline = interrupted
      ? `Interrupted after ${seconds}: the summary above is what ran so far; the checks need a finished run.`
      : failed.length === 0
        ? `All ${checks.length} checks passed in ${seconds} (case events: ${describeValueFormat(options.valueFormat)}).`
        : `${failed.length} of ${checks.length} checks FAILED: ${failed.map((c) => c.name).join('; ')}.`;

    // The report is a view of the run: failing to write it says so, and changes no outcome.
    const reported = await writeReport(options.reportFile, {
      timeline: buildTimeline({ log: metricLog, faults, consumers: consumerNames, startedAt, endedAt: Date.now() }),
      outcome: interrupted ? 'interrupted' : failed.length === 0 ? 'passed' : 'failed',
      headline,
      description:
        `npm start: seed ${options.seed}, ${options.events.toLocaleString('en-US')} events` +
        (options.rate !== null ? ` at ${options.rate.toLocaleString('en-US')}/s` : '') +
        `, ${options.partitions} partitions, at most ${options.workers} workers per consumer, tick ${options.tickMs} ms, wake-ups ${options.wakeUps ? 'on' : 'off'}`,
      summary,
      checks,
      generatedAt: new Date(),
    }).then(
      () => true,
      (error: unknown) => {
        out.write(`\nReport not written to ${options.reportFile}: ${error instanceof Error ? error.message : String(error)}\n`);
        return false;
      },
    );
    out.write(`${reported ? `\nReport: ${options.reportFile}\n` : ''}\n${headline}\n`);

    if (options.keep && !interrupted) {
      const stop = stopEmbedded ?? (async () => {});
      stopEmbedded = undefined;
      keptResult = { url, opsUrl: roleUrl(url, DatabaseRoles.ops), embedded: io.databaseUrl === undefined, stop };
    }
    return {
      ok: !interrupted && failed.length === 0,
      exitCode: !interrupted && failed.length === 0 ? ExitCode.passed : ExitCode.failed,
      interrupted,
      checks,
      consumers: summary,
      latency,
      workers,
      stream: stream.counts,
      elapsedMs,
      ...(reported ? { reportFile: options.reportFile } : {}),
      ...(keptResult ? { kept: keptResult } : {}),
    };
  } catch (error) {
    if (!(error instanceof InterruptedBeforeStart)) throw error;
    out.write('\nInterrupted before the run started: nothing ran.\n');
    return {
      ok: false,
      exitCode: ExitCode.failed,
      interrupted: true,
      checks: [],
      consumers: [],
      latency: [],
      workers: [],
      stream: { events: 0, caseEvents: 0, payments: 0, duplicates: 0, poison: 0, invalid: 0, outOfOrderCases: 0, faults: 0 },
      elapsedMs: performance.now() - started,
    };
  } finally {
    stopping = true;
    for (const stop of stoppers) stop();
    await Promise.allSettled(background);
    await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
    await sink.close();
    await stopEmbedded?.();
  }
}
