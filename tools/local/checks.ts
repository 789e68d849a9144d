/**
 * The invariant checks at the end of a local run: the database against the generator's
 * ledger. Each check names what it proves (docs/design.md §3) and, when it fails, a few of the
 * offending rows by their identifiers.
 *
 * These are read-only queries of a test tool, not inbox operations, so they live here
 * rather than in functions/inbox/.
 */
import type { Sql } from '../../functions/lib/db';
import type { GeneratedStream } from './generator';
import { CASE_PROJECTION, CASE_SLA, NOTIFICATION_SERVICE } from './generator';

export interface CheckResult {
  name: string;
  ok: boolean;
  /** One line: what was found (counts), or what is wrong (with examples). */
  detail: string;
}

export interface RunFacts {
  /** Consumers and their mapping's remaining lag (0 when every offset is committed). */
  lag: Map<string, number>;
  /** Rows a crashed worker claimed and abandoned: inbox ids per consumer. */
  crashed: Map<string, string[]>;
  /** How many crashes the run was asked to simulate (--crashes). */
  crashesRequested: number;
  /** Expired leases the reaper released or quarantined, per consumer. */
  reaped: Map<string, number>;
  /** What the ingest functions reported (RecordsInserted, RecordsPoisoned), per consumer. */
  ingestInserted: Map<string, number>;
  ingestPoisoned: Map<string, number>;
  timedOut: boolean;
  consumers: readonly string[];
}

const EXAMPLES = 3;

function examples(items: readonly string[]): string {
  const shown = items.slice(0, EXAMPLES).join(', ');
  return items.length > EXAMPLES ? `${shown}, … (${items.length} in all)` : shown;
}

function check(name: string, problems: readonly string[], okDetail: string): CheckResult {
  return problems.length === 0 ? { name, ok: true, detail: okDetail } : { name, ok: false, detail: examples(problems) };
}

interface InboxFact {
  consumer_name: string;
  event_id: string;
  inbox_id: string;
  status: string;
  error_code: string | null;
  attempt_count: number;
}

/** What the checks read: the run's facts, the generator's ledger, and the inbox and poison rows as they ended. */
interface CheckInput {
  sql: Sql;
  stream: GeneratedStream;
  facts: RunFacts;
  consumers: readonly string[];
  inbox: InboxFact[];
  /** The inbox rows by consumer, then event id. */
  byConsumer: Map<string, Map<string, InboxFact>>;
  poisonRows: PoisonFact[];
}

interface PoisonFact {
  consumer_name: string;
  topic_name: string;
  partition_no: number;
  offset_no: number;
  n: number;
}

/** The checks, in the order the report prints them; each proves one thing. */
const CHECKS: readonly ((input: CheckInput) => CheckResult | Promise<CheckResult>)[] = [
  settledInTime,
  offsetsCommitted,
  eventsEndAsExpected,
  nothingUnfinished,
  poisonCapturedOnce,
  effectsExactlyOnce,
  versionOrder,
  caseSummaries,
  slaObligations,
  notificationJobs,
  crashesRecovered,
  ingestMetricsMatch,
];

/**
 * A run on a consumer's own events (own-events.ts): what each event must become is unknown,
 * so these check what holds for any consumer.
 */
const OWN_CHECKS: readonly ((input: CheckInput) => CheckResult | Promise<CheckResult>)[] = [
  settledInTime,
  offsetsCommitted,
  recordsStoredOnceOrPoison,
  nothingUnfinished,
  effectsOncePerProcessedRow,
  grantsSuffice,
  crashesRecovered,
  ingestMetricsMatch,
];

export async function runChecks(sql: Sql, stream: GeneratedStream, facts: RunFacts): Promise<CheckResult[]> {
  const consumers = facts.consumers;
  const inbox = await sql<InboxFact[]>`
    select consumer_name, event_id, inbox_id::text, status, error_code, attempt_count
    from integration.consumer_inbox
    where consumer_name in ${sql(consumers as string[])}`;
  const byConsumer = new Map<string, Map<string, InboxFact>>(consumers.map((c) => [c, new Map()]));
  for (const row of inbox) byConsumer.get(row.consumer_name)!.set(row.event_id, row);
  const poisonRows = await sql<PoisonFact[]>`
    select consumer_name, topic_name, partition_no, offset_no, count(*)::int as n
    from integration.consumer_raw_poison
    where consumer_name in ${sql(consumers as string[])}
    group by consumer_name, topic_name, partition_no, offset_no`;
  const input: CheckInput = { sql, stream, facts, consumers, inbox, byConsumer, poisonRows };
  const results: CheckResult[] = [];
  for (const run of stream.own === undefined ? CHECKS : OWN_CHECKS) results.push(await run(input));
  return results;
}

/** Own events: each record of the file is an inbox row (one per event id) or a poison row at its offset; nothing else is stored. */
function recordsStoredOnceOrPoison({ stream, byConsumer, poisonRows }: CheckInput): CheckResult {
  const { consumer, records } = stream.own!;
  const rows = byConsumer.get(consumer)!;
  const poison = new Map(
    poisonRows.filter((r) => r.consumer_name === consumer).map((r) => [`${r.topic_name}-${r.partition_no}@${r.offset_no}`, r.n]),
  );
  const problems: string[] = [];
  const produced = new Set<string>();
  let poisoned = 0;
  for (const r of records) {
    const at = `${r.topic}-${r.partition}@${r.offset}`;
    const n = poison.get(at) ?? 0;
    poisoned += n;
    if (r.eventId !== null) produced.add(r.eventId);
    if (n > 1) problems.push(`${at}: ${n} poison rows`);
    else if (n === 0 && (r.eventId === null || !rows.has(r.eventId))) {
      problems.push(`${at}${r.eventId === null ? '' : ` (${r.eventId})`}: neither an inbox row nor poison`);
    }
    poison.delete(at);
  }
  for (const at of poison.keys()) problems.push(`${at}: a poison row for no record of the file`);
  for (const eventId of rows.keys())
    if (!produced.has(eventId)) problems.push(`${consumer}/${eventId}: an inbox row for no record of the file`);
  return check(
    'every record stored once as an inbox row, or captured as poison',
    problems,
    `${records.length} records: ${rows.size} inbox rows, ${poisoned} poison rows`,
  );
}

/** Own events: the wrapped handlers' ledger holds one application per PROCESSED row and none for any other. */
async function effectsOncePerProcessedRow({ sql, consumers, inbox }: CheckInput): Promise<CheckResult> {
  const effects = await sql<{ consumer_name: string; event_id: string; n: number }[]>`
    select consumer_name, event_id, count(*)::int as n from local_run.applied_effect group by consumer_name, event_id`;
  const count = new Map(effects.map((e) => [`${e.consumer_name}/${e.event_id}`, e.n]));
  const problems: string[] = [];
  let applied = 0;
  for (const row of inbox.filter((r) => consumers.includes(r.consumer_name))) {
    const key = `${row.consumer_name}/${row.event_id}`;
    const n = count.get(key) ?? 0;
    count.delete(key);
    applied += n;
    const want = row.status === 'PROCESSED' ? 1 : 0;
    if (n !== want) problems.push(`${key}: ${row.status}, effects applied ${n}×, expected ${want}×`);
  }
  for (const key of count.keys()) problems.push(`${key}: effects applied for no inbox row`);
  return check('side effects committed exactly once per processed row', problems, `${applied} applications, none repeated`);
}

/** Own events: no row quarantined for a grant the consumer's role lacks (SQLSTATE 42501). */
function grantsSuffice({ inbox }: CheckInput): CheckResult {
  const denied = inbox.filter((r) => r.error_code === 'DB_PERMISSION');
  return check(
    "the consumer's grants suffice (no row DB_PERMISSION)",
    denied.map((r) => `${r.consumer_name}/${r.event_id}: DB_PERMISSION (a table or column missing from the declaration's tables)`),
    'no statement refused for a missing grant',
  );
}

function settledInTime({ facts }: CheckInput): CheckResult {
  return check(
    'settled before the timeout',
    facts.timedOut ? ['the run did not settle in time; the checks below show what was left'] : [],
    'every mapping drained and every row final',
  );
}

function offsetsCommitted({ facts, consumers }: CheckInput): CheckResult {
  const lagging = consumers.filter((c) => (facts.lag.get(c) ?? 0) > 0).map((c) => `${c}: ${facts.lag.get(c)} records uncommitted`);
  return check('each mapping committed every offset', lagging, 'no partition held back');
}

/** 1. Every generated event ends exactly as the ledger says; nothing else is in the inbox. */
function eventsEndAsExpected({ stream, consumers, byConsumer }: CheckInput): CheckResult {
  const wrong: string[] = [];
  let expectedRows = 0;
  for (const consumer of consumers) {
    const rows = byConsumer.get(consumer)!;
    const expected = stream.expected.get(consumer) ?? new Map();
    expectedRows += expected.size;
    for (const [eventId, e] of expected) {
      const row = rows.get(eventId);
      if (row === undefined) wrong.push(`${consumer}/${eventId}: no inbox row (expected ${e.status})`);
      else if (row.status !== e.status || (e.errorCode !== undefined && row.error_code !== e.errorCode)) {
        wrong.push(
          `${consumer}/${eventId}: ${row.status}${row.error_code ? ` ${row.error_code}` : ''}, expected ${e.status}${e.errorCode ? ` ${e.errorCode}` : ''}`,
        );
      }
    }
    for (const eventId of rows.keys()) if (!expected.has(eventId)) wrong.push(`${consumer}/${eventId}: an inbox row nobody produced`);
  }
  return check(
    'every event processed once or quarantined for its injected reason',
    wrong,
    `${expectedRows} rows, each in its expected final state`,
  );
}

function nothingUnfinished({ inbox }: CheckInput): CheckResult {
  const unfinished = inbox.filter((r) => r.status === 'PROCESSING' || r.status === 'RECEIVED' || r.status === 'RETRY_PENDING');
  return check(
    'nothing left PROCESSING, RECEIVED or RETRY_PENDING',
    unfinished.map((r) => `${r.consumer_name}/${r.event_id}: ${r.status}`),
    'all rows final',
  );
}

/** 2. Every poison record captured once per consumer, at its coordinates. */
function poisonCapturedOnce({ stream, consumers, poisonRows }: CheckInput): CheckResult {
  const poisonProblems: string[] = [];
  let poisonExpected = 0;
  for (const consumer of consumers) {
    const expected = stream.poison.get(consumer) ?? [];
    poisonExpected += expected.length;
    const got = new Map(
      poisonRows.filter((r) => r.consumer_name === consumer).map((r) => [`${r.topic_name}-${r.partition_no}@${r.offset_no}`, r.n]),
    );
    for (const p of expected) {
      const key = `${p.topic}-${p.partition}@${p.offset}`;
      const n = got.get(key);
      if (n !== 1) poisonProblems.push(`${consumer} ${key} (${p.kind}): ${n ?? 0} poison rows`);
      got.delete(key);
    }
    for (const key of got.keys()) poisonProblems.push(`${consumer} ${key}: a poison row for a readable record`);
  }
  return check('every poison record captured once', poisonProblems, `${poisonExpected} poison rows, one per consumer and record`);
}

/** 3. Side effects exactly once: the wrapped handlers' ledger commits with the effects. */
async function effectsExactlyOnce({ sql, stream, consumers }: CheckInput): Promise<CheckResult> {
  const effects = await sql<{ consumer_name: string; event_id: string; n: number }[]>`
    select consumer_name, event_id, count(*)::int as n
    from local_run.applied_effect
    group by consumer_name, event_id`;
  const effectCount = new Map(effects.map((e) => [`${e.consumer_name}/${e.event_id}`, e.n]));
  const effectProblems: string[] = [];
  let applied = 0;
  for (const consumer of consumers) {
    for (const [eventId, e] of stream.expected.get(consumer) ?? new Map()) {
      const want = e.status === 'PROCESSED' ? 1 : 0;
      const n = effectCount.get(`${consumer}/${eventId}`) ?? 0;
      applied += n;
      if (n !== want) effectProblems.push(`${consumer}/${eventId}: effects applied ${n}×, expected ${want}×`);
    }
  }
  return check(
    'side effects committed exactly once per processed event',
    effectProblems,
    `${applied} applications, none repeated, none from a failed attempt`,
  );
}

/** 4. Versioned events applied in aggregate-version order, per case. */
async function versionOrder({ sql, stream }: CheckInput): Promise<CheckResult> {
  const disorder = await sql<{ aggregate_id: string; versions: number[] }[]>`
    with applied as (
      select aggregate_id, aggregate_version,
             lag(aggregate_version) over (partition by aggregate_id order by effect_id) as previous
      from local_run.applied_effect
      where consumer_name = ${CASE_PROJECTION}
    )
    select a.aggregate_id,
           (select array_agg(e.aggregate_version order by e.effect_id)
              from local_run.applied_effect e
             where e.consumer_name = ${CASE_PROJECTION} and e.aggregate_id = a.aggregate_id) as versions
    from applied a
    where a.aggregate_version is distinct from coalesce(a.previous + 1, 1)
    group by a.aggregate_id`;
  return check(
    'case events applied in aggregate-version order',
    disorder.map((d) => `${d.aggregate_id}: applied ${d.versions.join(',')}`),
    `${stream.counts.outOfOrderCases} cases produced out of order, all applied 1,2,3…`,
  );
}

/** 5. Domain tables: the case projection's summaries. */
async function caseSummaries({ sql, stream }: CheckInput): Promise<CheckResult> {
  const summaries = await sql<{ case_id: string; case_status: string; last_aggregate_version: number }[]>`
    select case_id, case_status, last_aggregate_version from read_model.case_summary`;
  const summaryById = new Map(summaries.map((s) => [s.case_id, s]));
  const summaryProblems: string[] = [];
  let expectedSummaries = 0;
  for (const c of stream.cases) {
    const s = summaryById.get(c.caseId);
    summaryById.delete(c.caseId);
    if (c.projection === null) {
      if (s !== undefined) summaryProblems.push(`${c.caseId}: has a case_summary, expected none`);
      continue;
    }
    expectedSummaries += 1;
    if (s === undefined) summaryProblems.push(`${c.caseId}: no case_summary`);
    else if (s.case_status !== c.projection.status || s.last_aggregate_version !== c.projection.version) {
      summaryProblems.push(
        `${c.caseId}: ${s.case_status} v${s.last_aggregate_version}, expected ${c.projection.status} v${c.projection.version}`,
      );
    }
  }
  for (const extra of summaryById.keys()) summaryProblems.push(`${extra}: a case_summary nobody produced`);
  return check("one case_summary per case, with its last version's status", summaryProblems, `${expectedSummaries} cases`);
}

/** 5. Domain tables: the SLA consumer's obligations. */
async function slaObligations({ sql, stream }: CheckInput): Promise<CheckResult> {
  const obligations = await sql<{ case_id: string; n: number }[]>`
    select case_id, count(*)::int as n from case_core.sla_obligation group by case_id`;
  const obligationsById = new Map(obligations.map((o) => [o.case_id, o.n]));
  const slaProblems: string[] = [];
  let expectedObligations = 0;
  for (const c of stream.cases) {
    const n = obligationsById.get(c.caseId) ?? 0;
    obligationsById.delete(c.caseId);
    const want = c.slaObligation ? 1 : 0;
    expectedObligations += want;
    if (n !== want) slaProblems.push(`${c.caseId}: ${n} obligations, expected ${want}`);
  }
  for (const extra of obligationsById.keys()) slaProblems.push(`${extra}: an obligation nobody asked for`);
  return check('one SLA obligation per accepted case', slaProblems, `${expectedObligations} obligations`);
}

/** 5. Domain tables: the notification service's jobs. */
async function notificationJobs({ sql, stream }: CheckInput): Promise<CheckResult> {
  const jobs = await sql<{ source_event_id: string; organization_id: string; n: number }[]>`
    select source_event_id, min(organization_id::text) as organization_id, count(*)::int as n
    from public.notification_jobs group by source_event_id`;
  const jobsById = new Map(jobs.map((j) => [j.source_event_id, j]));
  const jobProblems: string[] = [];
  for (const [eventId, orgId] of stream.notifications) {
    const j = jobsById.get(eventId);
    jobsById.delete(eventId);
    if (j === undefined) jobProblems.push(`${eventId}: no notification job`);
    else if (j.n !== 1) jobProblems.push(`${eventId}: ${j.n} notification jobs`);
    else if (j.organization_id !== orgId) jobProblems.push(`${eventId}: organization ${j.organization_id}, expected ${orgId}`);
  }
  for (const extra of jobsById.keys()) jobProblems.push(`${extra}: a notification job for no processed payment`);
  return check('one notification job per payment, for its org_id', jobProblems, `${stream.notifications.size} jobs`);
}

/** 6. Crashed workers: their rows came back through the reaper and were finished. */
function crashesRecovered({ facts, inbox }: CheckInput): CheckResult {
  const crashedIds = [...facts.crashed.values()].flat();
  const crashProblems: string[] = [];
  const reaped = [...facts.reaped.values()].reduce((a, b) => a + b, 0);
  // Asked for crashes but none happened: the check would prove nothing, so it fails.
  if (facts.crashesRequested > 0 && crashedIds.length === 0) {
    crashProblems.push(`${facts.crashesRequested} crashes requested, none simulated (no row was ever due to abandon)`);
  }
  if (crashedIds.length > 0) {
    const byId = new Map(inbox.map((r) => [r.inbox_id, r]));
    for (const id of crashedIds) {
      const row = byId.get(id);
      if (row === undefined) crashProblems.push(`${id}: gone`);
      else if (row.attempt_count < 2)
        crashProblems.push(`${row.consumer_name}/${row.event_id}: attempt_count ${row.attempt_count}, never re-claimed`);
    }
    if (reaped < crashedIds.length)
      crashProblems.push(`the reaper released ${reaped} leases, fewer than the ${crashedIds.length} abandoned`);
  }
  return check(
    "a crashed worker's rows recovered by the reaper",
    crashProblems,
    crashedIds.length === 0 ? 'no crash simulated' : `${crashedIds.length} abandoned rows released by the reaper and finished`,
  );
}

/** 7. What the ingest functions said agrees with what the database holds. */
function ingestMetricsMatch({ facts, consumers, byConsumer, poisonRows }: CheckInput): CheckResult {
  const countProblems: string[] = [];
  const poisonTotals = new Map<string, number>();
  for (const r of poisonRows) poisonTotals.set(r.consumer_name, (poisonTotals.get(r.consumer_name) ?? 0) + r.n);
  for (const consumer of consumers) {
    const rows = byConsumer.get(consumer)!.size;
    const said = facts.ingestInserted.get(consumer) ?? 0;
    if (said !== rows) countProblems.push(`${consumer}: RecordsInserted ${said}, inbox rows ${rows}`);
    const poisonSaid = facts.ingestPoisoned.get(consumer) ?? 0;
    const poisonHeld = poisonTotals.get(consumer) ?? 0;
    if (poisonSaid !== poisonHeld) countProblems.push(`${consumer}: RecordsPoisoned ${poisonSaid}, poison rows ${poisonHeld}`);
  }
  return check('ingest metrics match the rows stored', countProblems, 'RecordsInserted and RecordsPoisoned equal the rows');
}

export const ALL_CONSUMERS = [CASE_PROJECTION, CASE_SLA, NOTIFICATION_SERVICE] as const;
