/**
 * The local run's options: defaults, `--help`, and parsing of the command line.
 *
 * Parsing is strict: an unknown flag or a value out of range is an error naming the flag,
 * so a typo never silently runs the defaults.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';

export interface LocalOptions {
  /** Generated events (case events and payments together), before duplicates and poison. */
  events: number;
  /** Partitions per topic. */
  partitions: number;
  /** Seed of everything random: same seed, same stream, same fault plan. */
  seed: number;
  /** Share of events produced a second time at a later offset (same event id). */
  duplicateRate: number;
  /** Poison records (undecodable: bad base64, not UTF-8, not JSON, bad envelope, tombstone, NUL) per event. */
  poisonRate: number;
  /** Decodable events that break their contract (payload invalid, unknown version or type) per event. */
  invalidRate: number;
  /** Share of case chains with a status change produced out of aggregate-version order. */
  outOfOrderRate: number;
  /** Share of events whose handler fails transiently (then succeeds on a retry). */
  transientRate: number;
  /** Share of events whose handler fails for good (quarantined) or until attempts run out. */
  permanentRate: number;
  /** Share of deliveries the mapping redelivers (whole batch or its tail). */
  redeliveryRate: number;
  /** Share of ingest invocations whose database is unreachable (reported batch item failures). */
  infraFailureRate: number;
  /** Worker crashes: a worker that claims a batch and dies; the reaper must recover its rows. */
  crashes: number;
  /** Workers of one consumer awake at once, at most (its slots: WORKER_MAX_CONCURRENCY). */
  workers: number;
  /** Records per batch the mapping delivers (MSK BatchSize). */
  batchSize: number;
  /** Concurrent ingest invocations per consumer (the mapping's pollers). */
  pollers: number;
  /** How often the schedule invokes each worker and the reaper (1 minute in AWS). */
  tickMs: number;
  /**
   * Steady load: events per second, produced over `durationSeconds` as a producer would
   * write them (instead of a whole topic waiting at the start); null for the quick run.
   */
  rate: number | null;
  durationSeconds: number;
  /** The mapping's batching window: a partial batch waits this long for more records. */
  batchingWindowMs: number;
  /** Ingest wakes the worker and workers fan out and hand over; false: the schedule alone starts workers. */
  wakeUps: boolean;
  /**
   * The pause drill: pause one deferred consumer (ops pause) this long mid-run, then resume
   * it, and check that nothing of it was processed meanwhile (pause-drill.ts); 0: no drill.
   */
  pauseMs: number;
  /** Give up (and fail) after this long. */
  timeoutSeconds: number;
  /** Leave the database running after the run and print how to inspect it. */
  keep: boolean;
  /** Level of the functions' own log lines, written to `logFile` (never to the terminal). */
  logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR' | 'SILENT';
  logFile: string;
  /** Where the HTML report of the run goes. */
  reportFile: string;
  /** How the case topic's events are encoded: JSON, or Avro / Protobuf in the Confluent wire format against a local registry. */
  valueFormat: 'json' | 'avro' | 'protobuf';
  /** Own events (own-events.ts): run this consumer alone, on the values of `eventsFile`, instead of the generated stream. */
  consumer: string | null;
  eventsFile: string | null;
  /** A module of further declarations (own-events.ts) to run beside the listed ones. */
  declarations: string | null;
}

export const DEFAULT_OPTIONS: LocalOptions = {
  events: 4_000,
  partitions: 4,
  seed: 1,
  duplicateRate: 0.05,
  poisonRate: 0.01,
  invalidRate: 0.01,
  outOfOrderRate: 0.1,
  transientRate: 0.03,
  permanentRate: 0.01,
  redeliveryRate: 0.05,
  infraFailureRate: 0.05,
  crashes: 2,
  workers: 2,
  batchSize: 100,
  pollers: 2,
  tickMs: 250,
  rate: null,
  durationSeconds: 60,
  batchingWindowMs: 0,
  wakeUps: true,
  pauseMs: 3_000,
  timeoutSeconds: 120,
  keep: false,
  logLevel: 'WARN',
  logFile: '.local/local-run.log',
  reportFile: '.local/report.html',
  valueFormat: 'json',
  consumer: null,
  eventsFile: null,
  declarations: null,
};

/** What `--rate` changes unless the flag is given too: the production cadence. */
export const STEADY_LOAD = {
  /** EventBridge Scheduler's rate(1 minute). */
  tickMs: 60_000,
  /** The stages' default batchingWindowSeconds. */
  batchingWindowMs: 1_000,
  /** After the stream ends: time for the schedule and the reaper to recover crashed rows. */
  settleSeconds: 180,
} as const;

export const HELP = `npm start [-- options]

Runs the whole system on this machine: an embedded PostgreSQL (unless DATABASE_URL is set),
the migrations, a simulated MSK event-source mapping feeding generated events to the real
ingest functions of case-projection, case-sla and notification-service, the real worker on a
simulated Lambda service (woken by ingest, fanning out, and invoked by an accelerated
schedule) and the real reaper. Ends with a summary per consumer (counts, received → processed
latency, how the workers were invoked), invariant checks and an HTML report of the run
(charts of the dashboard's metrics over its time).

Exit status: 0 all checks passed; 1 a check failed or the run did not settle in time; 2 bad
options; 130 interrupted (Ctrl-C: the summary of what ran so far is printed, the embedded
database stopped and removed).

Stream
  --events <n>              events to generate                         (default ${DEFAULT_OPTIONS.events})
  --partitions <n>          partitions per topic                       (default ${DEFAULT_OPTIONS.partitions})
  --seed <n>                seed: same seed, same stream and faults    (default ${DEFAULT_OPTIONS.seed})
  --duplicate-rate <r>      events produced twice (same event id)      (default ${DEFAULT_OPTIONS.duplicateRate})
  --poison-rate <r>         undecodable records per event              (default ${DEFAULT_OPTIONS.poisonRate})
  --invalid-rate <r>        events breaking their contract             (default ${DEFAULT_OPTIONS.invalidRate})
  --out-of-order-rate <r>   case chains produced out of version order  (default ${DEFAULT_OPTIONS.outOfOrderRate})
  --value-format <f>        case events as json, or avro / protobuf in the Confluent wire
                            format, served by an in-process schema registry (default ${DEFAULT_OPTIONS.valueFormat})

Steady load (latency; the production cadence unless set otherwise)
  --rate <events/s>         produce this many events a second…
  --duration <seconds>      …for this long (events = rate × duration)  (default ${DEFAULT_OPTIONS.durationSeconds})
                            With --rate: --tick-ms ${STEADY_LOAD.tickMs}, --batching-window-ms ${STEADY_LOAD.batchingWindowMs},
                            --timeout duration + ${STEADY_LOAD.settleSeconds}, unless given.
  --no-wake-ups             ingest wakes no worker, workers fan out to none: the schedule
                            alone starts them (for comparison)

Faults
  --transient-rate <r>      handler fails, then succeeds on retry      (default ${DEFAULT_OPTIONS.transientRate})
  --permanent-rate <r>      handler fails for good                     (default ${DEFAULT_OPTIONS.permanentRate})
  --redelivery-rate <r>     deliveries redelivered by the mapping      (default ${DEFAULT_OPTIONS.redeliveryRate})
  --infra-failure-rate <r>  ingest calls with the database unreachable (default ${DEFAULT_OPTIONS.infraFailureRate})
  --crashes <n>             workers that claim a batch and die         (default ${DEFAULT_OPTIONS.crashes})

Your own events (one consumer, the faults above, the checks that hold for any consumer)
  --consumer <name>         run this consumer alone…
  --events <file>           …on the values of this file, one a line (JSON envelopes in its
                            dialect, or its own format); duplicates, redeliveries, outages,
                            transient failures and crashes as set; no pause drill
  --declarations <module>   a module exporting CONSUMERS (and SETUP_SQL, its tables), for a
                            consumer not yet in functions/consumers/index.ts

Operator
  --pause-ms <n>            pause case-sla (ops pause) this long mid-run, then resume it;
                            a check proves nothing was processed meanwhile; 0: no pause
                                                                       (default ${DEFAULT_OPTIONS.pauseMs})

Machinery
  --workers <n>             workers of a consumer awake at once, at most (default ${DEFAULT_OPTIONS.workers})
  --pollers <n>             concurrent ingest calls per consumer       (default ${DEFAULT_OPTIONS.pollers})
  --batch-size <n>          records per delivered batch                (default ${DEFAULT_OPTIONS.batchSize})
  --tick-ms <n>             worker and reaper schedule, milliseconds   (default ${DEFAULT_OPTIONS.tickMs}; 60000 is AWS's)
  --batching-window-ms <n>  the mapping's batching window              (default ${DEFAULT_OPTIONS.batchingWindowMs})
  --timeout <seconds>       fail if not settled by then                (default ${DEFAULT_OPTIONS.timeoutSeconds})
  --log-level <level>       functions' log level: DEBUG INFO WARN ERROR SILENT (default ${DEFAULT_OPTIONS.logLevel})
  --log-file <path>         where the functions' JSON logs go          (default ${DEFAULT_OPTIONS.logFile})
  --report <path>           where the HTML report goes                 (default ${DEFAULT_OPTIONS.reportFile})
  --keep                    leave the database running afterwards, to inspect it with
                            DATABASE_URL=… npm run ops -- stats
  -h, --help                this text

Rates are fractions between 0 and 1. DATABASE_URL=postgres://… runs against that server
instead of an embedded one (the run adds rows and a "local_run" schema to it).`;

const rate = z.coerce.number().min(0).max(1);
const count = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const FLAGS = {
  events: { key: 'events', schema: count(1, 1_000_000) },
  partitions: { key: 'partitions', schema: count(1, 64) },
  seed: { key: 'seed', schema: count(0, 2 ** 32 - 1) },
  'duplicate-rate': { key: 'duplicateRate', schema: rate },
  'poison-rate': { key: 'poisonRate', schema: rate },
  'invalid-rate': { key: 'invalidRate', schema: rate },
  'out-of-order-rate': { key: 'outOfOrderRate', schema: rate },
  'transient-rate': { key: 'transientRate', schema: rate },
  'permanent-rate': { key: 'permanentRate', schema: rate },
  'redelivery-rate': { key: 'redeliveryRate', schema: rate },
  'infra-failure-rate': { key: 'infraFailureRate', schema: rate.max(0.9) },
  crashes: { key: 'crashes', schema: count(0, 100) },
  workers: { key: 'workers', schema: count(1, 32) },
  pollers: { key: 'pollers', schema: count(1, 64) },
  'batch-size': { key: 'batchSize', schema: count(1, 10_000) },
  'tick-ms': { key: 'tickMs', schema: count(10, 60_000) },
  'batching-window-ms': { key: 'batchingWindowMs', schema: count(0, 300_000) },
  rate: { key: 'rate', schema: z.coerce.number().positive().max(100_000) },
  duration: { key: 'durationSeconds', schema: count(1, 24 * 3600) },
  timeout: { key: 'timeoutSeconds', schema: count(1, 24 * 3600) },
  'pause-ms': { key: 'pauseMs', schema: count(0, 600_000) },
  'log-level': {
    key: 'logLevel',
    schema: z
      .string()
      .toUpperCase()
      .pipe(z.enum(['DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT'])),
  },
  'log-file': { key: 'logFile', schema: z.string().min(1) },
  report: { key: 'reportFile', schema: z.string().min(1) },
  'value-format': {
    key: 'valueFormat',
    schema: z
      .string()
      .toLowerCase()
      .pipe(z.enum(['json', 'avro', 'protobuf'])),
  },
} as const satisfies Record<string, { key: keyof LocalOptions; schema: z.ZodType }>;

export class OptionsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OptionsError';
  }
}

export type ParsedArgs = { help: true } | { help: false; options: LocalOptions };

/** Parse `npm start -- …` arguments. Throws OptionsError naming the offending flag. */
export function parseLocalArgs(argv: readonly string[]): ParsedArgs {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        ...Object.fromEntries(Object.keys(FLAGS).map((flag) => [flag, { type: 'string' as const }])),
        consumer: { type: 'string' },
        declarations: { type: 'string' },
        keep: { type: 'boolean' },
        'no-wake-ups': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    throw new OptionsError(`${error instanceof Error ? error.message : String(error)} (see --help)`);
  }
  if (parsed.values.help === true) return { help: true };
  const options: Record<string, unknown> = { ...DEFAULT_OPTIONS };
  const consumer = parsed.values.consumer as string | undefined;
  if (consumer !== undefined) {
    // Own events: --events names the file, the generated stream's flags do not apply.
    const file = parsed.values.events as string | undefined;
    if (file === undefined || file === '') throw new OptionsError('--consumer needs --events <file>: the values to run it on (see --help)');
    for (const flag of ['rate', 'duration', 'invalid-rate', 'poison-rate', 'out-of-order-rate', 'value-format'] as const) {
      if (parsed.values[flag] !== undefined) throw new OptionsError(`--${flag} does not apply to --consumer's own events (see --help)`);
    }
    options.consumer = consumer;
    options.eventsFile = file;
    options.pauseMs = 0;
  }
  if (parsed.values.declarations !== undefined) options.declarations = parsed.values.declarations;
  for (const [flag, { key, schema }] of Object.entries(FLAGS)) {
    if (flag === 'events' && consumer !== undefined) continue;
    const raw = parsed.values[flag];
    if (raw === undefined) continue;
    const result = (schema as z.ZodType).safeParse(raw);
    if (!result.success) {
      throw new OptionsError(`--${flag} ${String(raw)}: ${result.error.issues[0]?.message ?? 'invalid'} (see --help)`);
    }
    options[key] = result.data;
  }
  if (parsed.values.keep === true) options.keep = true;
  if (parsed.values['no-wake-ups'] === true) options.wakeUps = false;
  const given = (flag: keyof typeof FLAGS) => parsed.values[flag] !== undefined;
  if (given('duration') && !given('rate')) throw new OptionsError('--duration needs --rate (see --help)');
  if (given('rate')) {
    if (given('events')) throw new OptionsError('--events and --rate both set the number of events: give one (see --help)');
    const rate = options.rate as number;
    const duration = options.durationSeconds as number;
    options.events = Math.max(1, Math.round(rate * duration));
    if ((options.events as number) > 1_000_000)
      throw new OptionsError(`--rate ${rate} for --duration ${duration} makes ${options.events} events, more than 1,000,000 (see --help)`);
    if (!given('tick-ms')) options.tickMs = STEADY_LOAD.tickMs;
    if (!given('batching-window-ms')) options.batchingWindowMs = STEADY_LOAD.batchingWindowMs;
    if (!given('timeout')) options.timeoutSeconds = duration + STEADY_LOAD.settleSeconds;
  }
  return { help: false, options: options as unknown as LocalOptions };
}
