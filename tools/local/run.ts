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
 *   worker        the real worker invocation (functions/wings/wake-ups/invocation.ts, what the
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
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CONSUMERS } from '../../functions/consumers';
import type { KafkaEvent } from '../../functions/ingest/types';
import { emitsEvents, type ConsumerDeclaration } from '../../functions/framework/types';
import { provisionConsumerRoles } from '../../functions/inbox/consumer-roles';
import { claimDue } from '../../functions/inbox/claim-due';
import { createWorkerInvocation } from '../../functions/wings/wake-ups/invocation';
import { wakeUpsTo } from '../../functions/wings/wake-ups/wake-worker';
import { inboxStatusCounts, poisonCounts } from '../../functions/ops/queries/stats';
import { createIngestHandler } from '../../functions/ingest/ingest';
import { binaryValues } from '../../functions/wings/decoding/binary-values';
import { parseConfig, type Config } from '../../functions/lib/config';
import { createSql, type Sql } from '../../functions/lib/db';
import { migrate } from '../../functions/lib/migrate';
import { loadMigrations, MIGRATIONS_DIR } from '../../functions/lib/migration-files';
import { MetricNames } from '../../functions/lib/metric-names';
import { runOnce } from '../../functions/reaper/reaper';
import {
  DatabaseRoles,
  ingestRoleOf,
  relayRoleOf,
  runtimeRoles,
  workerRoleOf,
  type DatabaseRole,
} from '../../functions/lib/database-roles';
import { prepareRoleLogins, roleUrl } from '../database-roles';
import { freePort, startEmbeddedPostgres } from '../embedded-postgres';
import { runChecks, type CheckResult } from './checks';
import { ExitCode } from './exit-codes';
import { prepareLedger, withFaults } from './faults';
import { generateStream, TOPIC_CONSUMERS, type GeneratedStream } from './generator';
import { loadDeclarations, ownStream, OwnEventsError, type ExtraDeclarations } from './own-events';
import { writeReport } from './html-report';
import { runTraces, startRunTracing, traceProducers, type RunTracing } from './traces';
import { describeValueFormat, useValueFormat, type LocalRegistry } from './value-format';
import { SimulatedLambda } from './lambda';
import { SimulatedMapping } from './mapping';
import { keyedDraw } from './random';
import { CapturingMetrics, fileSink, MetricLog, nullSink, SinkLogger, type LogSink } from './observability';
import { localRelay, relayChecks, SimulatedTopics, type LocalRelay } from './relay';
import { DEFAULT_OPTIONS, type LocalOptions } from './options';
import { PauseDrill } from './pause-drill';
import { LOCAL_SCHEDULE_GROUP, SimulatedScheduler } from './scheduler';
import { LOCAL_CONSUMER_DIRECTORY, localConsumerDirectory } from './directory';
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

/** The listed consumers the generated stream does not feed, and how to run them. */
function notGenerated(): string[] {
  const others = CONSUMERS.filter((c) => !GENERATED_CONSUMERS.includes(c.name)).map((c) => c.name);
  return others.length === 0
    ? []
    : [`Not in the generated stream: ${others.join(', ')} (run one on your own events: --consumer <name> --events <file>).`];
}

function describeStream(s: GeneratedStream, options: LocalOptions): string {
  const c = s.counts;
  if (s.own !== undefined) {
    return [
      `Your events: ${plural(c.events, 'value')} of ${options.eventsFile} for ${s.own.consumer} on ${[...s.topics.keys()].join(', ')},`,
      `  plus ${c.duplicates} duplicates; ${c.faults} injected transient handler faults; ${options.partitions} partitions.`,
      `Schedule every ${options.tickMs.toLocaleString('en-US')} ms; wake-ups ${options.wakeUps ? 'on' : 'OFF (the schedule alone starts workers)'}.`,
      'Checks: what holds for any consumer (its events are yours: what each must become is not known here).',
    ].join('\n');
  }
  return [
    `Stream (seed ${s.seed}): ${c.events.toLocaleString('en-US')} events — ${c.caseEvents} case events in ${s.cases.length} cases, ${c.payments} payments —`,
    `  plus ${c.duplicates} duplicates, ${c.poison} poison records, ${c.invalid} contract violations; ${c.outOfOrderCases} cases out of version order;`,
    `  ${c.faults} injected handler faults; ${options.partitions} partitions per topic.`,
    options.rate !== null
      ? `Steady load: ${options.rate.toLocaleString('en-US')} events/s for ${options.durationSeconds} s; schedule every ${options.tickMs.toLocaleString('en-US')} ms, batching window ${options.batchingWindowMs} ms; wake-ups ${options.wakeUps ? 'on' : 'OFF (the schedule alone starts workers)'}.`
      : `Schedule every ${options.tickMs.toLocaleString('en-US')} ms; wake-ups ${options.wakeUps ? 'on' : 'OFF (the schedule alone starts workers)'}.`,
    `Consumers: case-projection, case-sla ← regulatory.case.events.v1 (canonical, deferred); notification-service ← payment.completed (snake_case, inline).`,
    ...notGenerated(),
  ].join('\n');
}

/** What a run holds until its end, whatever phase it stopped in: runLocal's finally releases it. */
interface Lifecycle {
  /** Background loops (mappings, workers, reaper) stop on this flag, also when the run throws. */
  stopping: boolean;
  background: Promise<unknown>[];
  stoppers: (() => void)[];
  clients: Sql[];
  sink: LogSink;
  stopEmbedded: (() => Promise<void>) | undefined;
}

/** The run's database: the owner's client, and a client per function role. */
interface Database {
  url: string;
  config: Config;
  /** The run's own client (migrations, observation, checks): the owner. */
  admin: Sql;
  client(poolMax: number, overrides?: Partial<Config['database']>): Promise<Sql>;
  /** A client that connects as a function's own role, as in AWS. */
  as(role: DatabaseRole, poolMax: number): Promise<Sql>;
}

/** What every simulated part of the system shares: the services, the logs and metrics, the stream. */
interface Simulation {
  options: LocalOptions;
  life: Lifecycle;
  db: Database;
  stream: GeneratedStream;
  registry: LocalRegistry | undefined;
  metricLog: MetricLog;
  faults: FaultEvent[];
  fault(kind: FaultKind, consumer: string): void;
  logger(component: string, consumerName?: string): SinkLogger;
  consumers: Map<string, ConsumerDeclaration>;
  consumerNames: string[];
  /** A wait that ends at once when the run stops. */
  pause(ms: number): Promise<void>;
  lambdaService: SimulatedLambda;
  lambdaClient: LambdaClient;
  schedulerService: SimulatedScheduler;
  /** Steady load: when the producer writes a record of this timestamp. */
  releasedAt: ((timestamp: number) => number) | undefined;
  invocationErrors: Map<string, number>;
  reportFailure(what: string, log: SinkLogger): (error: unknown) => void;
  invokeSafely(what: string, log: SinkLogger, run: () => Promise<unknown>): Promise<void>;
}

type Mappings = { consumer: string; mapping: SimulatedMapping }[];

/** The planned worker crashes and what they abandoned. */
interface Crashes {
  /** Inbox ids each consumer's crashed workers claimed and abandoned. */
  crashed: Map<string, string[]>;
  happened: number;
  pendingTotal(): number;
  pending(consumer: string): boolean;
}

/** Expired leases the reaper released or quarantined, and those it quarantined, per consumer. */
interface Reaped {
  reaped: Map<string, number>;
  quarantined: Map<string, number>;
}

/** Per consumer: worker invocations that found every slot held, or the consumer paused, and returned at once; and those ops resume sent. */
type IdleInvocations = Map<string, { count: number; paused: number; resumed: number }>;

export async function runLocal(options: LocalOptions, io: RunLocalIO = {}): Promise<LocalRunResult> {
  const out: Output = io.out ?? { write: (t) => void process.stdout.write(t) };
  const started = performance.now();
  const startedAt = Date.now();
  const aborted = () => io.signal?.aborted === true;
  const checkpoint = () => {
    if (aborted()) throw new InterruptedBeforeStart();
  };
  const life: Lifecycle = { stopping: false, background: [], stoppers: [], clients: [], sink: nullSink, stopEmbedded: undefined };
  let tracing: RunTracing | undefined;

  try {
    const { extra, running } = await consumersOfRun(options);
    const db = await startDatabase(options, io, out, life, checkpoint, extra);
    checkpoint();
    const sim = await prepareSimulation(options, out, life, db, running);
    tracing = await traceRun(sim);
    const mappings = await createMappings(sim);
    const crashes = await startCrashes(sim, mappings);
    const idle = await startWorkers(sim, crashes);
    const reaped = await startReaper(sim);
    const { relay, topics } = await startRelay(sim);
    startMappings(life, mappings);
    const drill = await startPauseDrill(sim, mappings, crashes);

    const progress = new Progress(out, io.tty ?? false);
    const { timedOut, snapshot } = await observeUntilSettled(sim, { mappings, crashes, reaped, relay, progress, started, aborted });
    await drain(life, progress, () => ({
      ...snapshot,
      elapsedMs: performance.now() - started,
      crashes: crashes.happened,
      reaped: sumOf(reaped.reaped),
    }));

    const interrupted = aborted();
    const summary = consumerSummaries(sim, reaped);
    const workers = workerSummaries(sim, idle);
    const latency = latencies(sim);
    // An interrupted run has not settled: every check would fail for that alone.
    const checks = interrupted ? [] : await allChecks(sim, { mappings, crashes, reaped, relay, topics, drill, timedOut });
    await printSummary(sim, out, { summary, latency, workers, mappings, crashes, relay, interrupted, checks });

    const failed = checks.filter((c) => !c.ok);
    const elapsedMs = performance.now() - started;
    const headline = headlineOf(options, { interrupted, checks, failed, elapsedMs });
    const reported = await writeHtmlReport(sim, out, tracing, { startedAt, interrupted, failed, headline, summary, checks });
    out.write(`${reported ? `\nReport: ${options.reportFile}\n` : ''}\n${headline}\n`);

    const kept = options.keep && !interrupted ? keepDatabase(life, db.url, io.databaseUrl === undefined) : undefined;
    return {
      ok: !interrupted && failed.length === 0,
      exitCode: !interrupted && failed.length === 0 ? ExitCode.passed : ExitCode.failed,
      interrupted,
      checks,
      consumers: summary,
      latency,
      workers,
      stream: sim.stream.counts,
      elapsedMs,
      ...(reported ? { reportFile: options.reportFile } : {}),
      ...(kept ? { kept } : {}),
    };
  } catch (error) {
    if (!(error instanceof InterruptedBeforeStart)) throw error;
    out.write('\nInterrupted before the run started: nothing ran.\n');
    return interruptedBeforeStart(started);
  } finally {
    life.stopping = true;
    for (const stop of life.stoppers) stop();
    await Promise.allSettled(life.background);
    await tracing?.stop();
    await Promise.all(life.clients.map((c) => c.end({ timeout: 5 })));
    await life.sink.close();
    await life.stopEmbedded?.();
  }
}

/** The consumers the generated stream feeds. */
const GENERATED_CONSUMERS = Object.values(TOPIC_CONSUMERS).flat();

/** The consumers the run provisions (the listed ones and a --declarations module's) and those it runs (all listed, or --consumer's). */
async function consumersOfRun(options: LocalOptions): Promise<{ extra: ExtraDeclarations; running: readonly ConsumerDeclaration[] }> {
  const extra = await loadDeclarations(options.declarations);
  // The generated stream feeds the consumers its generator knows; others run on their own events.
  if (options.consumer === null) return { extra, running: CONSUMERS.filter((c) => GENERATED_CONSUMERS.includes(c.name)) };
  const declared = [...CONSUMERS, ...extra.consumers];
  const own = declared.find((c) => c.name === options.consumer);
  if (own === undefined) {
    throw new OwnEventsError(`--consumer ${options.consumer}: no such consumer (known: ${declared.map((c) => c.name).join(', ')})`);
  }
  return { extra, running: [own] };
}

const sumOf = (counts: Map<string, number>) => [...counts.values()].reduce((a, b) => a + b, 0);

/** The database: an embedded PostgreSQL unless one is given, migrated, each function role able to log in. */
async function startDatabase(
  options: LocalOptions,
  io: RunLocalIO,
  out: Output,
  life: Lifecycle,
  checkpoint: () => void,
  extra: ExtraDeclarations,
): Promise<Database> {
  let url = io.databaseUrl;
  if (url === undefined) {
    out.write('Starting an embedded PostgreSQL… ');
    const t = performance.now();
    const embedded = await startEmbeddedPostgres();
    life.stopEmbedded = () => embedded.stop();
    url = embedded.url;
    out.write(`ready in ${((performance.now() - t) / 1000).toFixed(1)} s (port ${embedded.port}).\n`);
  }
  checkpoint();
  const config = configFor(url, options);
  const client = async (poolMax: number, overrides: Partial<Config['database']> = {}) => {
    const c = await createSql({ ...config.database, poolMax, ...overrides });
    life.clients.push(c);
    return c;
  };
  // The run's own client (migrations, observation, checks) is the owner; every function
  // connects as its own role, as in AWS, so a grant it lacks fails the run.
  const admin = await client(2);
  const migrated = await migrate(admin, await loadMigrations(MIGRATIONS_DIR));
  // A --declarations module's tables, as its consumers' migration would create them.
  if (extra.setupSql !== undefined) await admin.unsafe(extra.setupSql);
  const declared = [...CONSUMERS, ...extra.consumers];
  await provisionConsumerRoles(admin, declared);
  out.write(`Migrations: ${migrated.applied.length} applied, ${migrated.alreadyApplied} already applied.\n`);
  await assertEmpty(admin);
  await prepareRoleLogins(admin, url, runtimeRoles(declared));
  await prepareLedger(admin);
  const adminUrl = url;
  const as = (role: DatabaseRole, poolMax: number) => client(poolMax, { url: roleUrl(adminUrl, role) });
  return { url, config, admin, client, as };
}

/** The stream, its value format, the function logs, and the simulated services every part shares. */
async function prepareSimulation(
  options: LocalOptions,
  out: Output,
  life: Lifecycle,
  db: Database,
  declared: readonly ConsumerDeclaration[],
): Promise<Simulation> {
  const stream = options.eventsFile === null ? generateStream(options) : await ownStream(options, declared[0]!, options.eventsFile);
  out.write(`${describeStream(stream, options)}\n`);
  const registry = options.valueFormat === 'json' ? undefined : await useValueFormat(stream, options.valueFormat);
  if (registry !== undefined) {
    life.background.push(new Promise<void>((resolve) => life.stoppers.push(() => void registry.close().then(resolve, resolve))));
  }
  out.write(`Case events: ${describeValueFormat(options.valueFormat)}${registry ? `, ${registry.encoded} records encoded` : ''}.\n`);
  if (options.logLevel !== 'SILENT') {
    life.sink = fileSink(options.logFile);
    out.write(`Function logs (${options.logLevel} and above, JSON): ${options.logFile}\n`);
  }
  out.write('\n');

  const faults: FaultEvent[] = [];
  const consumers = new Map<string, ConsumerDeclaration>(
    declared.map((c) => [c.name, withFaults(c, stream.faults.get(c.name) ?? new Map())]),
  );
  // The loops' waits end at once when the run stops: a schedule of 60 s must not hold up the end.
  const stopped = new AbortController();
  life.stoppers.push(() => stopped.abort());
  // The Lambda service the workers run on, and the client the functions invoke them with.
  const lambdaService = new SimulatedLambda();
  // Running invocations see no time left and return; the run waits for them with the other loops.
  life.stoppers.push(() => life.background.push(lambdaService.stop()));
  // Steady load: the producer writes each record at its place on the stream's clock, replayed at the run's rate.
  const streamStartsAt = performance.now();
  // A scheduled function's failed invocation is logged and the next tick tries again, as
  // EventBridge Scheduler would; it never ends the run.
  const invocationErrors = new Map<string, number>();
  const reportFailure = (what: string, log: SinkLogger) => (error: unknown) => {
    invocationErrors.set(what, (invocationErrors.get(what) ?? 0) + 1);
    log.error('invocation failed', { error: error instanceof Error ? error.message : String(error) });
  };
  return {
    options,
    life,
    db,
    stream,
    registry,
    metricLog: new MetricLog(),
    faults,
    fault: (kind, consumer) => void faults.push({ time: Date.now(), kind, consumer }),
    logger: (component, consumerName) =>
      new SinkLogger(life.sink, {
        serviceName: db.config.observability.serviceName,
        logLevel: options.logLevel,
        persistentKeys: { component, ...(consumerName ? { consumerName } : {}) },
      }),
    consumers,
    consumerNames: [...consumers.keys()],
    pause: (ms) => sleep(ms, undefined, { signal: stopped.signal }).catch(() => {}),
    lambdaService,
    lambdaClient: lambdaService.client(),
    // The workers' schedules, which ops pause and resume switch.
    schedulerService: new SimulatedScheduler(),
    releasedAt:
      options.rate === null
        ? undefined
        : (timestamp) => streamStartsAt + ((timestamp - stream.clock.startsAt) / stream.clock.spanMs) * options.durationSeconds * 1000,
    invocationErrors,
    reportFailure,
    invokeSafely: async (what, log, run) => {
      try {
        await run();
      } catch (error) {
        reportFailure(what, log)(error);
      }
    },
  };
}

/** Ingest: per consumer and topic, a simulated mapping feeding the real handler, on a working client and on an unreachable one. */
async function createMappings(sim: Simulation): Promise<Mappings> {
  const unreachableUrl = `postgres://postgres@127.0.0.1:${await freePort()}/unreachable`;
  const mappings: Mappings = [];
  // A mapping per consumer and topic of the stream: one topic read by two consumers feeds both.
  for (const topic of sim.stream.topics.keys()) {
    for (const [name, consumer] of sim.consumers) {
      if (consumer.topics.includes(topic))
        mappings.push({ consumer: name, mapping: await ingestMapping(sim, topic, name, unreachableUrl) });
    }
  }
  return mappings;
}

async function ingestMapping(sim: Simulation, topic: string, name: string, unreachableUrl: string): Promise<SimulatedMapping> {
  const { options, db } = sim;
  const config = db.config;
  const consumer = sim.consumers.get(name)!;
  const deps = {
    consumer,
    config,
    logger: sim.logger('ingest', name),
    metrics: new CapturingMetrics(sim.metricLog, name),
    valueDecoder: binaryValues(consumer, sim.registry?.source),
  };
  const live = createIngestHandler({
    ...deps,
    sql: await db.as(ingestRoleOf(consumer), options.pollers),
    ...(options.wakeUps ? { wakeUp: wakeUpsTo({ lambda: sim.lambdaClient, functionName: workerFunctionOf(name) }) } : {}),
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
  const releasedAt = sim.releasedAt;
  return new SimulatedMapping({
    consumerName: name,
    topic,
    partitions: sim.stream.topics.get(topic)!,
    batchSize: options.batchSize,
    pollers: options.pollers,
    seed: options.seed,
    redeliveryRate: options.redeliveryRate,
    infraFailureRate: options.infraFailureRate,
    ...(releasedAt !== undefined ? { releasedAt, batchingWindowMs: options.batchingWindowMs } : {}),
    invoke: (event) => flushed(live(event, context())),
    invokeUnreachable: (event) => flushed(unreachable(event)),
    onFault: (kind) => sim.fault(kind, name),
  });
}

/**
 * Crashes: a worker of a deferred consumer claims rows under a short lease and dies
 * before completing them. The planned crashes go round-robin over the deferred
 * consumers; until a consumer's crash has happened the Lambda service holds its worker
 * invocations back, so the crash always finds rows to abandon however fast the machine
 * drains the backlog.
 */
async function startCrashes(sim: Simulation, mappings: Mappings): Promise<Crashes> {
  const { consumerNames } = sim;
  const crashTargets = consumerNames.filter((c) => sim.consumers.get(c)!.mode === 'deferred');
  const pendingCrashes = new Map<string, number>(crashTargets.map((c) => [c, 0]));
  for (let n = 0; n < sim.options.crashes && crashTargets.length > 0; n++) {
    const target = crashTargets[n % crashTargets.length]!;
    pendingCrashes.set(target, pendingCrashes.get(target)! + 1);
  }
  const crashes: Crashes = {
    crashed: new Map<string, string[]>(consumerNames.map((c) => [c, []])),
    happened: 0,
    pendingTotal: () => [...pendingCrashes.values()].reduce((a, b) => a + b, 0),
    pending: (name) => (pendingCrashes.get(name) ?? 0) > 0,
  };
  const mappingsDoneFor = (name: string) => mappings.filter((m) => m.consumer === name).every((m) => m.mapping.done);
  // A crashed worker of each consumer connects as that consumer's worker role, as its function would.
  const crashSqls = new Map<string, Sql>();
  for (const name of sim.consumers.keys()) crashSqls.set(name, await sim.db.as(workerRoleOf({ name }), 1));
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
      crashes.crashed.get(name)!.push(...rows.map((r) => r.inbox_id));
      pendingCrashes.set(name, pending - 1);
      crashes.happened += 1;
      sim.fault('worker-crash', name);
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
    sim.life.background.push(
      (async () => {
        while (!sim.life.stopping && crashes.pending(name)) {
          await sim.invokeSafely(`crash ${name}`, sim.logger('worker', name), () => crashOnce(name));
          if (crashes.pending(name)) await sim.pause(CRASH_POLL_MS);
        }
      })(),
    );
  }
  return crashes;
}

/**
 * Workers: one function per consumer on the simulated Lambda service, as in AWS: the
 * invocation handler the Lambda handler runs, its fan-out and hand-over invoking the
 * function itself through the same client.
 */
async function startWorkers(sim: Simulation, crashes: Crashes): Promise<IdleInvocations> {
  const idle: IdleInvocations = new Map();
  for (const [name, consumer] of sim.consumers) {
    const noSlot = { count: 0, paused: 0, resumed: 0 };
    idle.set(name, noSlot);
    await startWorker(sim, crashes, name, consumer, noSlot);
  }
  return idle;
}

async function startWorker(
  sim: Simulation,
  crashes: Crashes,
  name: string,
  consumer: ConsumerDeclaration,
  noSlot: { count: number; paused: number; resumed: number },
): Promise<void> {
  const { options, lambdaService } = sim;
  const functionName = workerFunctionOf(name);
  const log = sim.logger('worker', name);
  const metrics = new CapturingMetrics(sim.metricLog, name);
  const invoke = createWorkerInvocation({
    sql: await sim.db.as(workerRoleOf(consumer), options.workers + 2),
    consumer,
    config: sim.db.config,
    logger: log,
    metrics,
    self: { lambda: sim.lambdaClient, functionName },
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
    holdWhile: () => crashes.pending(name),
    onError: sim.reportFailure(`worker ${name}`, log),
  });
  // The schedule: an asynchronous invocation every tick, while it is enabled. The run
  // starts at some point of the schedule's period, as it would against a schedule that
  // exists already: the first tick comes after a seeded fraction of the period, each
  // consumer's its own.
  sim.schedulerService.add(workerScheduleOf(name), functionName);
  sim.life.background.push(
    (async () => {
      await sim.pause(Math.floor(keyedDraw(options.seed, 'schedule', name) * options.tickMs));
      while (!sim.life.stopping) {
        if (sim.schedulerService.enabled(workerScheduleOf(name))) lambdaService.invokeAsync(functionName, { source: 'schedule' });
        await sim.pause(options.tickMs);
      }
    })(),
  );
}

/** Reaper: one loop for all consumers, every tick. */
async function startReaper(sim: Simulation): Promise<Reaped> {
  const reaped = new Map<string, number>(sim.consumerNames.map((c) => [c, 0]));
  const quarantined = new Map<string, number>(sim.consumerNames.map((c) => [c, 0]));
  const reaperSql = await sim.db.as(DatabaseRoles.reaper, 1);
  const reaperLogger = sim.logger('reaper');
  const reaperMetrics = new CapturingMetrics(sim.metricLog);
  sim.life.background.push(
    (async () => {
      while (!sim.life.stopping) {
        const invocationEnds = performance.now() + INVOCATION_MS;
        await sim.invokeSafely('reaper', reaperLogger, async () => {
          const result = await runOnce({
            sql: reaperSql,
            consumers: [...sim.consumers.values()],
            config: sim.db.config,
            logger: reaperLogger,
            metrics: reaperMetrics,
            remainingMs: () => Math.max(0, invocationEnds - performance.now()),
          });
          for (const c of result.consumers) {
            reaped.set(c.consumerName, (reaped.get(c.consumerName) ?? 0) + c.released + c.quarantined);
            quarantined.set(c.consumerName, (quarantined.get(c.consumerName) ?? 0) + c.quarantined);
          }
        });
        await sim.pause(sim.options.tickMs);
      }
    })(),
  );
  return { reaped, quarantined };
}

/**
 * Outbox relay: one loop of a relay per emitting consumer, each as its consumer's relay role,
 * publishing to simulated topics (tools/local/relay.ts). It runs at
 * the quick run's cadence even under steady load (--tick-ms 60000): what --rate measures is
 * the workers' latency, and a relay ticking once a minute would only hold the run's end
 * (every obligation published, its two crashes taken over) for minutes.
 */
async function startRelay(sim: Simulation): Promise<{ relay: LocalRelay; topics: SimulatedTopics }> {
  const topics = new SimulatedTopics({ seed: sim.options.seed, refuseRate: 0.05 });
  const relay = localRelay({
    relays: await Promise.all(
      [...sim.consumers.values()]
        .filter(emitsEvents)
        .map(async (consumer) => ({ consumer, sql: await sim.db.as(relayRoleOf(consumer), 2) })),
    ),
    config: sim.db.config,
    logger: sim.logger('relay'),
    metrics: new CapturingMetrics(sim.metricLog),
    topics,
    tickMs: Math.min(sim.options.tickMs, DEFAULT_OPTIONS.tickMs),
    invocationMs: INVOCATION_MS,
    crashes: 2,
    isStopping: () => sim.life.stopping,
  });
  sim.life.background.push(relay.run());
  return { relay, topics };
}

function startMappings(life: Lifecycle, mappings: Mappings): void {
  for (const { mapping } of mappings) {
    life.stoppers.push(() => mapping.stop());
    life.background.push(mapping.run());
  }
}

/** The operator: pauses one deferred consumer mid-run with the real ops commands, then resumes it. */
async function startPauseDrill(sim: Simulation, mappings: Mappings, crashes: Crashes): Promise<PauseDrill | undefined> {
  const { options, consumerNames } = sim;
  if (!(options.pauseMs > 0 && sim.consumers.has(PAUSED_CONSUMER))) return undefined;
  const own = mappings.filter((m) => m.consumer === PAUSED_CONSUMER).map((m) => m.mapping);
  const drill = new PauseDrill({
    consumer: PAUSED_CONSUMER,
    pauseMs: options.pauseMs,
    admin: sim.db.admin,
    ops: {
      sql: await sim.db.as(DatabaseRoles.ops, 2),
      scheduler: sim.schedulerService.client(),
      lambda: sim.lambdaClient,
      consumers: [...sim.consumers.values()],
      ssm: localConsumerDirectory(
        new Map(
          consumerNames.map((c) => [c, { workerSchedule: workerScheduleOf(c), workerFunction: workerFunctionOf(c), ingestMappings: [] }]),
        ),
      ),
      config: {
        scheduler: { groupName: LOCAL_SCHEDULE_GROUP },
        consumerDirectory: LOCAL_CONSUMER_DIRECTORY,
        maxPayloadBytes: sim.db.config.maxPayloadBytes,
      },
    },
    delivered: () => {
      const total = own.reduce((n, m) => n + m.total, 0);
      return total === 0 ? 1 : 1 - own.reduce((n, m) => n + m.lag, 0) / total;
    },
    holdDeliveries: () => own.forEach((m) => m.hold()),
    releaseDeliveries: () => own.forEach((m) => m.release()),
    ready: () => !crashes.pending(PAUSED_CONSUMER),
    isStopping: () => sim.life.stopping,
  });
  sim.life.background.push(drill.run().catch(sim.reportFailure('pause drill', sim.logger('ops'))));
  return drill;
}

type StatusCounts = Awaited<ReturnType<typeof inboxStatusCounts>>;
type PoisonCounts = Awaited<ReturnType<typeof poisonCounts>>;

/** Observe: progress, crashes, and the end of the run (settled, aborted or timed out). */
async function observeUntilSettled(
  sim: Simulation,
  run: {
    mappings: Mappings;
    crashes: Crashes;
    reaped: Reaped;
    relay: LocalRelay;
    progress: Progress;
    started: number;
    aborted: () => boolean;
  },
): Promise<{ timedOut: boolean; snapshot: ProgressSnapshot }> {
  const { mappings, crashes } = run;
  const admin = sim.db.admin;
  const deadline = run.started + sim.options.timeoutSeconds * 1000;
  let counted: { statuses: StatusCounts; poison: PoisonCounts; at: number } | undefined;
  for (;;) {
    // Settled? A cheap look first (has the open-row index an entry?); the counts that
    // confirm it are read at once, the others once a second.
    const mappingsDone = mappings.every((m) => m.mapping.done);
    const maybeSettled = mappingsDone && crashes.pendingTotal() === 0 && !(await anyOpenRow(admin));
    if (counted === undefined || maybeSettled || performance.now() - counted.at >= COUNT_MS) {
      const [statuses, poison] = await Promise.all([inboxStatusCounts(admin), poisonCounts(admin)]);
      counted = { statuses, poison, at: performance.now() };
    }
    const { statuses, poison } = counted;
    const open = statuses
      .filter((s) => s.status === 'RECEIVED' || s.status === 'RETRY_PENDING' || s.status === 'PROCESSING')
      .reduce((n, s) => n + s.count, 0);
    const snapshot = progressSnapshot(performance.now() - run.started, mappings, statuses, poison, crashes, run.reaped);
    run.progress.update(snapshot);

    if (maybeSettled && open === 0 && (await run.relay.settled())) return { timedOut: false, snapshot };
    if (run.aborted()) return { timedOut: false, snapshot };
    if (performance.now() > deadline) return { timedOut: true, snapshot };
    await sleep(OBSERVE_MS);
  }
}

function progressSnapshot(
  elapsedMs: number,
  mappings: Mappings,
  statuses: StatusCounts,
  poison: PoisonCounts,
  crashes: Crashes,
  reaped: Reaped,
): ProgressSnapshot {
  const total = (pred: (s: StatusCounts[number]) => boolean) => statuses.filter(pred).reduce((n, s) => n + s.count, 0);
  const ms = mappings.map((m) => m.mapping.stats);
  return {
    elapsedMs,
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
    crashes: crashes.happened,
    reaped: sumOf(reaped.reaped),
  };
}

/** Drain: every loop and invocation stops and is waited for; the progress line ends with the figures as they are then. */
async function drain(life: Lifecycle, progress: Progress, last: () => ProgressSnapshot): Promise<void> {
  life.stopping = true;
  for (const stop of life.stoppers) stop();
  await Promise.all(life.background);
  progress.finish(last());
}

function consumerSummaries(sim: Simulation, reaped: Reaped): ConsumerSummary[] {
  const total = (consumer: string, name: string) => sim.metricLog.total(consumer, name);
  return sim.consumerNames.map((name) => ({
    consumer: name,
    received: total(name, MetricNames.RecordsReceived),
    inserted: total(name, MetricNames.RecordsInserted),
    duplicates: total(name, MetricNames.RecordsDuplicate),
    poison: total(name, MetricNames.RecordsPoisoned),
    processed: total(name, MetricNames.EventsProcessed),
    retried: total(name, MetricNames.EventsRetried),
    quarantined: total(name, MetricNames.EventsQuarantined) + (reaped.quarantined.get(name) ?? 0),
    ignored: total(name, MetricNames.EventsIgnored),
    reaped: reaped.reaped.get(name) ?? 0,
  }));
}

function workerSummaries(sim: Simulation, idle: IdleInvocations): WorkerSummary[] {
  const total = (consumer: string, name: string) => sim.metricLog.total(consumer, name);
  return sim.consumerNames.map((name) => {
    const st = sim.lambdaService.stats(workerFunctionOf(name));
    return {
      consumer: name,
      invocations: st.started,
      wokenByIngest: total(name, MetricNames.WakeUpsSent),
      fannedOut: total(name, MetricNames.FanOutsSent),
      handedOver: total(name, MetricNames.HandOversSent),
      wakeUpFailures: total(name, MetricNames.WakeUpFailures),
      noSlot: idle.get(name)!.count,
      paused: idle.get(name)!.paused,
      resumed: idle.get(name)!.resumed,
      peakConcurrency: st.peakConcurrency,
      throttled: st.throttled,
      expired: st.expired,
    };
  });
}

function latencies(sim: Simulation): ConsumerLatency[] {
  return sim.consumerNames.map((name) => {
    const values = sim.metricLog.values(name, MetricNames.ProcessingLatency).sort((a, b) => a - b);
    const at = (p: number) => (values.length === 0 ? null : percentile(values, p));
    return {
      consumer: name,
      rows: values.length,
      p50: at(50),
      p95: at(95),
      p99: at(99),
      max: values.at(-1) ?? null,
      inline: sim.consumers.get(name)!.mode === 'inline',
    };
  });
}

/** The invariant checks (checks.ts), then the relay's and the pause drill's. */
async function allChecks(
  sim: Simulation,
  run: {
    mappings: Mappings;
    crashes: Crashes;
    reaped: Reaped;
    relay: LocalRelay;
    topics: SimulatedTopics;
    drill: PauseDrill | undefined;
    timedOut: boolean;
  },
): Promise<CheckResult[]> {
  const { consumerNames } = sim;
  const total = (consumer: string, name: string) => sim.metricLog.total(consumer, name);
  const checks = await runChecks(sim.db.admin, sim.stream, {
    consumers: consumerNames,
    lag: new Map(run.mappings.map((m) => [m.consumer, m.mapping.lag])),
    crashed: run.crashes.crashed,
    crashesRequested: sim.options.crashes,
    reaped: run.reaped.reaped,
    ingestInserted: new Map(consumerNames.map((c) => [c, total(c, MetricNames.RecordsInserted)])),
    ingestPoisoned: new Map(consumerNames.map((c) => [c, total(c, MetricNames.RecordsPoisoned)])),
    timedOut: run.timedOut,
  });
  // The relay's checks follow case-sla's obligations: the generated stream's.
  if (sim.stream.own === undefined) checks.push(...(await relayChecks(sim.db.admin, run.topics, run.relay.stats)));
  if (run.drill !== undefined) checks.push(await run.drill.check());
  return checks;
}

/** The report on the terminal: the tables, a line per part of the system, the final states and the checks. */
async function printSummary(
  sim: Simulation,
  out: Output,
  run: {
    summary: ConsumerSummary[];
    latency: ConsumerLatency[];
    workers: WorkerSummary[];
    mappings: Mappings;
    crashes: Crashes;
    relay: LocalRelay;
    interrupted: boolean;
    checks: CheckResult[];
  },
): Promise<void> {
  const { options } = sim;
  const finalStates = await sim.db.admin<{ consumer_name: string; status: string; error_code: string | null; n: number }[]>`
    select consumer_name, status, case when status = 'QUARANTINED' then error_code end as error_code, count(*)::int as n
    from integration.consumer_inbox
    group by 1, 2, 3
    order by 1, 2, 4 desc`;

  out.write(`\n${summaryTable(run.summary)}\n\n${latencyTable(run.latency)}\n\n`);
  out.write(mappingsLine(run.mappings, options));
  out.write(crashesLine(run.crashes));
  out.write(relayLine(run.relay));
  out.write(workersLine(run.workers, options));
  if (sim.invocationErrors.size > 0) {
    out.write(
      `Failed invocations (retried on the next tick; see the log): ${[...sim.invocationErrors].map(([w, n]) => `${w} ${n}`).join(', ')}.\n`,
    );
  }
  out.write(run.interrupted ? 'States so far:\n' : 'Final states:\n');
  for (const name of sim.consumerNames) {
    const rows = finalStates.filter((r) => r.consumer_name === name);
    const parts = rows.map((r) => `${r.status}${r.error_code ? ` ${r.error_code}` : ''} ${r.n}`);
    out.write(`  ${name}: ${parts.join(' · ')}\n`);
  }
  if (!run.interrupted) out.write(`\nChecks:\n${checksReport(run.checks)}\n`);
}

function mappingsLine(mappings: Mappings, options: LocalOptions): string {
  const ms = mappings.map((m) => m.mapping.stats);
  const sum = (f: (s: (typeof ms)[number]) => number) => ms.reduce((n, s) => n + f(s), 0);
  return (
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
    )}.\n`
  );
}

function crashesLine(crashes: Crashes): string {
  return (
    `Crashes: ${
      [...crashes.crashed.entries()]
        .filter(([, ids]) => ids.length > 0)
        .map(([c, ids]) => `${c} (${plural(ids.length, 'row')} abandoned)`)
        .join(', ') || 'none'
    }; ` + `their leases (${CRASH_LEASE_SECONDS} s) expired and the reaper returned them.\n`
  );
}

function relayLine(relay: LocalRelay): string {
  return (
    `Outbox relay: ${plural(relay.stats.invocations, 'invocation')}, ${plural(relay.stats.published, 'event')} published, ` +
    `${plural(relay.stats.refused, 'send')} refused and retried, crashes ${relay.stats.crashes.map((c) => `${c.kind} (${plural(c.rows, 'row')})`).join(', ') || 'none'}` +
    `${relay.stats.crashesNotSimulated > 0 ? ` (${relay.stats.crashesNotSimulated} planned, nothing to abandon)` : ''}.\n`
  );
}

function workersLine(workers: WorkerSummary[], options: LocalOptions): string {
  return `Workers (wake-ups ${options.wakeUps ? 'on' : 'off'}, at most ${options.workers} awake per consumer): ${workers
    .map(
      (w) =>
        `${w.consumer} ${plural(w.invocations, 'invocation')} (${w.wokenByIngest} woken by ingest, ${w.fannedOut} fanned out, ${w.handedOver} handed over, ` +
        `${w.resumed > 0 ? `${w.resumed} woken by ops resume, ` : ''}` +
        `${w.wakeUpFailures} wake-ups failed; ${w.noSlot} found every slot held${w.paused > 0 ? `, ${w.paused} found it paused` : ''}; ` +
        `at most ${w.peakConcurrency} running, ${w.throttled} throttled, ${w.expired} expired)`,
    )
    .join(' · ')}.\n`;
}

function headlineOf(
  options: LocalOptions,
  run: { interrupted: boolean; checks: CheckResult[]; failed: CheckResult[]; elapsedMs: number },
): string {
  const { checks, failed } = run;
  const seconds = `${(run.elapsedMs / 1000).toFixed(1)} s`;
  return run.interrupted
    ? `Interrupted after ${seconds}: the summary above is what ran so far; the checks need a finished run.`
    : failed.length === 0
      ? `All ${checks.length} checks passed in ${seconds}${options.consumer === null ? ` (case events: ${describeValueFormat(options.valueFormat)})` : ''}.`
      : `${failed.length} of ${checks.length} checks FAILED: ${failed.map((c) => c.name).join('; ')}.`;
}

/** The report is a view of the run: failing to write it says so, and changes no outcome. Whether it was written. */
/**
 * The functions' spans, into memory for the report (traces.ts), with each generated event sent
 * by a traced producer. Stopped after the report (runLocal's finally): stopping clears the exporter.
 */
async function traceRun(sim: Simulation): Promise<RunTracing> {
  const tracing = await startRunTracing();
  traceProducers(sim.stream, (timestamp) =>
    sim.releasedAt === undefined ? Date.now() : performance.timeOrigin + sim.releasedAt(timestamp),
  );
  return tracing;
}

async function writeHtmlReport(
  sim: Simulation,
  out: Output,
  tracing: RunTracing,
  run: {
    startedAt: number;
    interrupted: boolean;
    failed: CheckResult[];
    headline: string;
    summary: ConsumerSummary[];
    checks: CheckResult[];
  },
): Promise<boolean> {
  const { options } = sim;
  return writeReport(options.reportFile, {
    timeline: buildTimeline({
      log: sim.metricLog,
      faults: sim.faults,
      consumers: sim.consumerNames,
      startedAt: run.startedAt,
      endedAt: Date.now(),
    }),
    outcome: run.interrupted ? 'interrupted' : run.failed.length === 0 ? 'passed' : 'failed',
    headline: run.headline,
    description:
      `npm start: seed ${options.seed}, ${options.events.toLocaleString('en-US')} events` +
      (options.rate !== null ? ` at ${options.rate.toLocaleString('en-US')}/s` : '') +
      `, ${options.partitions} partitions, at most ${options.workers} workers per consumer, tick ${options.tickMs} ms, wake-ups ${options.wakeUps ? 'on' : 'off'}`,
    summary: run.summary,
    checks: run.checks,
    traces: runTraces(tracing.exporter),
    generatedAt: new Date(),
  }).then(
    () => true,
    (error: unknown) => {
      out.write(`\nReport not written to ${options.reportFile}: ${error instanceof Error ? error.message : String(error)}\n`);
      return false;
    },
  );
}

/** --keep: the database outlives the run; the caller stops an embedded one. */
function keepDatabase(life: Lifecycle, url: string, embedded: boolean): NonNullable<LocalRunResult['kept']> {
  const stop = life.stopEmbedded ?? (async () => {});
  life.stopEmbedded = undefined;
  return { url, opsUrl: roleUrl(url, DatabaseRoles.ops), embedded, stop };
}

function interruptedBeforeStart(started: number): LocalRunResult {
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
}
