/**
 * A stage's connection budget (docs/capacity.md, "Connections"): the most connections its
 * functions can hold at once, from its configuration, against the writer's max_connections.
 * The stage config refuses a stage over it (cdk/config.ts), the app prints it at every synth
 * (cdk/app.ts), and the connections alarm fires where the budget ends (alarms.ts), so that the
 * alarm pages before the database refuses a connection and never sits above the real limit.
 *
 * The peak counts containers, not invocations: a Lambda container keeps its connections
 * while frozen between invocations (until the client's idle timeout closes them at its next
 * start, or the role's idle_session_timeout ends them on the server), so a function holds as
 * many as it has had containers at once, each with up to its pool (DB_POOL_MAX, set here).
 */
import type { SessionKind } from '../functions/lib/session-settings';
import type { ConsumerStageConfig, StageConfig } from './config';

/**
 * Aurora PostgreSQL Serverless v2's default max_connections by maximum capacity (AWS, Amazon
 * Aurora User Guide, "Performance and scaling for Aurora Serverless v2", section "Maximum
 * connections for Aurora Serverless v2"). Aurora sets it from the maximum capacity when the
 * writer starts, and holds it as the writer scales.
 */
export const SERVERLESS_V2_MAX_CONNECTIONS: readonly (readonly [maxAcu: number, maxConnections: number])[] = [
  [1, 189],
  [4, 823],
  [8, 1_669],
  [16, 3_360],
  [32, 5_000],
  [64, 5_000],
  [128, 5_000],
  [256, 5_000],
];

/** With a minimum capacity of this or less, Aurora PostgreSQL caps max_connections at MIN_CAPACITY_CAP (same page). */
export const LOW_MINIMUM_ACU = 0.5;
export const MIN_CAPACITY_CAP = 2_000;

/**
 * Concurrent invocations of one provisioned-mode event poller, at most: the planning figure
 * this budget assumes (Lambda documents an event poller's throughput, not its concurrency; a
 * mapping also never has more invocations at once than its topic has partitions).
 */
export const INVOCATIONS_PER_POLLER = 5;

/** Connections one container of each function opens at most (its DB_POOL_MAX): one statement at a time, ops two. */
export const POOL_MAX: Readonly<Record<SessionKind, number>> = { ingest: 1, worker: 1, relay: 1, reaper: 1, ops: 2, migrate: 1 };

/** Operators' and scheduled replays' ops invocations at once: the planning figure. */
export const OPS_CONTAINERS = 2;

/** What the proxy may open of the writer's connections leaves this much of the budget to the migration function and operators. */
export const PROXY_HEADROOM_PERCENT = 5;

/** Where a stage's max_connections comes from. */
export interface MaxConnections {
  value: number;
  /** How it was arrived at, for the printout and the refusal. */
  basis: string;
}

/** max_connections of a Serverless v2 writer with this capacity range: AWS's table, between its rows in proportion, and its cap. */
export function serverlessV2MaxConnections(minCapacityAcu: number, maxCapacityAcu: number): MaxConnections {
  const table = SERVERLESS_V2_MAX_CONNECTIONS;
  const upper = table.findIndex(([acu]) => acu >= maxCapacityAcu);
  let fromTable: number;
  if (upper <= 0) fromTable = table[upper < 0 ? table.length - 1 : 0]![1];
  else {
    // A maximum between the table's rows (2 ACU): in proportion between them, rounded down.
    const [a0, c0] = table[upper - 1]!;
    const [a1, c1] = table[upper]!;
    fromTable = Math.floor(c0 + ((c1 - c0) * (maxCapacityAcu - a0)) / (a1 - a0));
  }
  const range = `Aurora Serverless v2 at ${minCapacityAcu}–${maxCapacityAcu} ACU`;
  if (minCapacityAcu <= LOW_MINIMUM_ACU && fromTable > MIN_CAPACITY_CAP) {
    return {
      value: MIN_CAPACITY_CAP,
      basis: `${range}: ${fromTable.toLocaleString('en-US')}, capped at ${MIN_CAPACITY_CAP.toLocaleString('en-US')} with a minimum of ${LOW_MINIMUM_ACU} ACU or less`,
    };
  }
  return { value: fromTable, basis: range };
}

/** The stage's max_connections: the one it declares (its parameter group's), else Aurora's for its capacity range. */
export function maxConnectionsOf(config: Pick<StageConfig, 'database'>): MaxConnections {
  const d = config.database;
  if (d.maxConnections !== undefined) return { value: d.maxConnections, basis: 'declared (database.maxConnections)' };
  return serverlessV2MaxConnections(d.minCapacityAcu, d.maxCapacityAcu);
}

/** One function's share of the peak. */
export interface BudgetLine {
  function: 'ingest' | 'worker' | 'relay' | 'reaper' | 'ops' | 'migration';
  /** Containers at once, over every consumer. */
  containers: number;
  connections: number;
  /** How the containers are counted. */
  how: string;
}

export interface ConnectionBudget {
  lines: BudgetLine[];
  /** What the functions can hold at once. */
  peak: number;
  /** What the writer sees: the peak, or with RDS Proxy what the proxy may open and the migration's. */
  atDatabase: number;
  maxConnections: MaxConnections;
  /** The budget: the share of max_connections the connections alarm allows (alarms.databaseConnectionsPercent). */
  limit: number;
  /** RDS Proxy's MaxConnectionsPercent, when the stage has a proxy. */
  proxyMaxConnectionsPercent?: number;
}

const sum = (ns: readonly number[]) => ns.reduce((a, b) => a + b, 0);

/** Containers of a function that runs on a schedule: overlapping invocations when it may run longer than its interval. */
function scheduledContainers(timeoutSeconds: number, intervalMinutes: number): number {
  return Math.max(1, Math.ceil(timeoutSeconds / (intervalMinutes * 60)));
}

/** A worker's containers: its slots, and one more that finds them all held; fewer if Lambda reserves fewer. */
function workerContainers(c: ConsumerStageConfig): number {
  const reserved = typeof c.workerReservedConcurrency === 'number' ? c.workerReservedConcurrency : Number.POSITIVE_INFINITY;
  return Math.min(c.workerMaxConcurrency + 1, reserved);
}

/** The alarm's threshold on DatabaseConnections: the budget's limit. */
export function connectionsAlarmThreshold(config: Pick<StageConfig, 'database' | 'alarms'>): number {
  return Math.floor((maxConnectionsOf(config).value * config.alarms.databaseConnectionsPercent) / 100);
}

/** RDS Proxy's share of max_connections: the budget less the headroom of the functions that connect directly. */
export function proxyMaxConnectionsPercent(config: Pick<StageConfig, 'alarms'>): number {
  return Math.max(1, config.alarms.databaseConnectionsPercent - PROXY_HEADROOM_PERCENT);
}

export function connectionBudget(config: Omit<StageConfig, 'manifest'>): ConnectionBudget {
  const consumers = config.consumers;
  const emitting = consumers.filter((c) => c.outboxTopics.length > 0);
  const ingest = sum(consumers.map((c) => c.topics.length * c.maxPollers * INVOCATIONS_PER_POLLER));
  const workers = sum(consumers.map(workerContainers));
  const relays = emitting.length * scheduledContainers(config.relay.timeoutSeconds, config.relay.intervalMinutes);
  const reapers = scheduledContainers(config.reaper.timeoutSeconds, config.reaper.intervalMinutes);
  const line = (fn: BudgetLine['function'], kind: SessionKind, containers: number, how: string): BudgetLine => ({
    function: fn,
    containers,
    connections: containers * POOL_MAX[kind],
    how,
  });
  const lines = [
    line(
      'ingest',
      'ingest',
      ingest,
      `${consumers.length} consumers: mappings × maxPollers × ${INVOCATIONS_PER_POLLER} invocations a poller`,
    ),
    line('worker', 'worker', workers, 'per consumer: workerMaxConcurrency + 1 (the one that finds every slot held)'),
    line('relay', 'relay', relays, `${plural(emitting.length, 'emitting consumer')} × overlapping runs (timeout over interval)`),
    line('reaper', 'reaper', reapers, 'overlapping runs (timeout over interval)'),
    line('ops', 'ops', OPS_CONTAINERS, 'operators and scheduled replays at once'),
    line('migration', 'migrate', 1, 'at deploy time, to the writer directly'),
  ];
  const peak = sum(lines.map((l) => l.connections));
  const maxConnections = maxConnectionsOf(config);
  const limit = connectionsAlarmThreshold(config);
  if (!config.database.rdsProxy) return { lines, peak, atDatabase: peak, maxConnections, limit };
  // Behind RDS Proxy the writer sees the proxy's pool (a share of max_connections, which the
  // functions' statements multiplex: none of them pins a session) and the migration's own.
  const percent = proxyMaxConnectionsPercent(config);
  const proxied = peak - 1;
  const atDatabase = Math.min(proxied, Math.floor((maxConnections.value * percent) / 100)) + 1;
  return { lines, peak, atDatabase, maxConnections, limit, proxyMaxConnectionsPercent: percent };
}

const n = (x: number) => x.toLocaleString('en-US');
const plural = (x: number, what: string) => `${n(x)} ${what}${x === 1 ? '' : 's'}`;

/** The budget as synth prints it. */
export function formatConnectionBudget(stage: string, budget: ConnectionBudget): string {
  const { maxConnections, limit } = budget;
  const width = Math.max(...budget.lines.map((l) => l.function.length));
  const rows = budget.lines.map(
    (l) => `  ${l.function.padEnd(width)}  ${n(l.connections).padStart(6)}  (${plural(l.containers, 'container')}; ${l.how})`,
  );
  const proxy =
    budget.proxyMaxConnectionsPercent === undefined
      ? ''
      : `\n  behind RDS Proxy (MaxConnectionsPercent ${budget.proxyMaxConnectionsPercent}): the writer sees at most ${n(budget.atDatabase)}`;
  return (
    `Connection budget of stage ${stage}: ${n(budget.atDatabase)} of ${n(limit)} ` +
    `(the connections alarm's ${percentOf(limit, maxConnections.value)} % of max_connections ${n(maxConnections.value)}: ${maxConnections.basis})\n` +
    `${rows.join('\n')}\n  ${'peak'.padEnd(width)}  ${n(budget.peak).padStart(6)}${proxy}`
  );
}

function percentOf(part: number, whole: number): number {
  return Math.round((part / whole) * 100);
}

/**
 * Why the stage does not fit, naming what to change, or nothing. The biggest shares are
 * named first.
 */
export function connectionBudgetProblems(stage: string, budget: ConnectionBudget): string[] {
  if (budget.atDatabase <= budget.limit) return [];
  const biggest = [...budget.lines]
    .sort((a, b) => b.connections - a.connections)
    .slice(0, 2)
    .map((l) => `${l.function} ${n(l.connections)}`)
    .join(', ');
  return [
    `stages.${stage}: the functions can hold ${n(budget.atDatabase)} connections at once (${biggest}, …), over the budget of ${n(budget.limit)} ` +
      `(alarms.databaseConnectionsPercent of max_connections ${n(budget.maxConnections.value)}: ${budget.maxConnections.basis}). ` +
      "Lower consumerDefaults.maxPollers or workerMaxConcurrency (or a consumer's), raise database.maxCapacityAcu (max_connections changes only when the writer restarts), " +
      `set database.minCapacityAcu above ${LOW_MINIMUM_ACU} to lift the ${n(MIN_CAPACITY_CAP)} cap, put RDS Proxy in front (database.rdsProxy), or declare database.maxConnections if the parameter group sets it (docs/capacity.md, "Connections")`,
  ];
}
