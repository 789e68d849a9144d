import { describe, expect, it } from 'vitest';
import { CASE_ACCEPTED, CASE_EVENTS_TOPIC, CASE_STATUS_CHANGED } from '../../../functions/consumers/case-projection';
import { PAYMENT_COMPLETED } from '../../../functions/consumers/notification-service';
import {
  CASE_PROJECTION,
  CASE_SLA,
  expectationUnder,
  generateStream,
  INJECTED,
  NOTIFICATION_SERVICE,
  POISON_KINDS,
  type ProducedRecord,
} from '../../../tools/local/generator';
import { DEFAULT_OPTIONS, type LocalOptions } from '../../../tools/local/options';

const options: LocalOptions = { ...DEFAULT_OPTIONS, events: 600, poisonRate: 0.02, invalidRate: 0.02, duplicateRate: 0.1 };

function allRecords(stream: ReturnType<typeof generateStream>): { topic: string; partition: number; offset: number; r: ProducedRecord }[] {
  return [...stream.topics].flatMap(([topic, parts]) =>
    parts.flatMap((log, partition) => log.map((r, offset) => ({ topic, partition, offset, r }))),
  );
}

describe('generateStream', () => {
  it('gives the same stream and plan for the same seed, another for another seed', () => {
    const a = generateStream(options);
    const b = generateStream(options);
    const c = generateStream({ ...options, seed: options.seed + 1 });
    const bytes = (s: typeof a) =>
      allRecords(s)
        .map(({ r }) => r.value?.toString('base64') ?? r.rawValueBase64 ?? 'null')
        .join('|');
    expect(bytes(b)).toBe(bytes(a));
    expect([...b.faults.get(CASE_SLA)!]).toEqual([...a.faults.get(CASE_SLA)!]);
    expect(bytes(c)).not.toBe(bytes(a));
  });

  it('produces the requested number of events, and duplicates with the same bytes later in the same partition', () => {
    const s = generateStream(options);
    expect(s.counts.events).toBe(600);
    expect(s.counts.caseEvents + s.counts.payments).toBe(600);
    const records = allRecords(s);
    const duplicates = records.filter(({ r }) => r.label.kind === 'duplicate');
    expect(duplicates.length).toBe(s.counts.duplicates);
    expect(duplicates.length).toBeGreaterThan(0);
    for (const d of duplicates) {
      const id = d.r.label.kind === 'duplicate' ? d.r.label.eventId : '';
      const original = records.find(({ r }) => r.label.kind === 'event' && r.label.eventId === id)!;
      expect(original.partition).toBe(d.partition);
      expect(original.offset).toBeLessThan(d.offset);
      expect(original.r.value!.equals(d.r.value!)).toBe(true);
    }
  });

  it('makes every poison kind, each expected once per consumer of its topic', () => {
    const s = generateStream(options);
    const poison = allRecords(s).filter(({ r }) => r.label.kind === 'poison');
    expect(new Set(poison.map(({ r }) => (r.label.kind === 'poison' ? r.label.poison : '')))).toEqual(new Set(POISON_KINDS));
    const onCases = poison.filter((p) => p.topic === CASE_EVENTS_TOPIC).length;
    const onPayments = poison.filter((p) => p.topic === PAYMENT_COMPLETED).length;
    expect(s.poison.get(CASE_PROJECTION)!.length).toBe(onCases);
    expect(s.poison.get(CASE_SLA)!.length).toBe(onCases);
    expect(s.poison.get(NOTIFICATION_SERVICE)!.length).toBe(onPayments);
  });

  it('keeps per-key order except in the cases it makes out of order', () => {
    const s = generateStream({ ...options, outOfOrderRate: 0.5 });
    const seen = new Map<string, number[]>();
    for (const { topic, r } of allRecords(s)) {
      if (topic !== CASE_EVENTS_TOPIC || r.label.kind !== 'event') continue;
      const e = JSON.parse(r.value!.toString('utf8')) as { aggregateId: string; aggregateVersion: number; eventType: string };
      if (!e.aggregateId.startsWith('case_0')) continue;
      seen.set(e.aggregateId, [...(seen.get(e.aggregateId) ?? []), e.aggregateVersion]);
    }
    // Across partitions the offsets say nothing about order; count chains whose versions
    // are not ascending in production order over all partitions' interleaving instead.
    const outOfOrder = [...seen.values()].filter((vs) => vs.some((v, i) => i > 0 && v < vs[i - 1]!)).length;
    expect(s.counts.outOfOrderCases).toBeGreaterThan(0);
    expect(outOfOrder).toBeGreaterThan(0);
    expect(outOfOrder).toBeLessThanOrEqual(s.counts.outOfOrderCases);
  });

  it('expects each case summary at the last version applied, stopping at a version failed for good', () => {
    const s = generateStream({ ...options, permanentRate: 0.5, transientRate: 0 });
    const versions = new Map<string, { version: number; eventId: string }[]>();
    for (const { topic, r } of allRecords(s)) {
      if (topic !== CASE_EVENTS_TOPIC || r.label.kind !== 'event') continue;
      const e = JSON.parse(r.value!.toString('utf8')) as { aggregateId: string; aggregateVersion: number; eventId: string };
      versions.set(e.aggregateId, [...(versions.get(e.aggregateId) ?? []), { version: e.aggregateVersion, eventId: e.eventId }]);
    }
    const projection = s.expected.get(CASE_PROJECTION)!;
    let cutShort = 0;
    for (const c of s.cases) {
      const chain = versions.get(c.caseId)!.sort((a, b) => a.version - b.version);
      let applied = 0;
      for (const v of chain) {
        if (projection.get(v.eventId)!.status !== 'PROCESSED') break;
        applied = v.version;
      }
      expect(c.projection?.version ?? 0).toBe(applied);
      if (applied < chain.length) cutShort += 1;
    }
    expect(cutShort).toBeGreaterThan(0);
  });

  it('quarantines no case-sla acceptance that has status changes behind it (they would be held for an operator)', () => {
    const s = generateStream({ ...options, permanentRate: 0.5 });
    const chains = new Map<string, number>();
    const acceptances = new Map<string, string>();
    for (const { r } of allRecords(s)) {
      if (r.label.kind !== 'event' || r.value === null) continue;
      const envelope = JSON.parse(r.value.toString()) as { eventId: string; eventType: string; aggregateId: string };
      if (!envelope.aggregateId?.startsWith('case_')) continue;
      chains.set(envelope.aggregateId, (chains.get(envelope.aggregateId) ?? 0) + 1);
      if (envelope.eventType === CASE_ACCEPTED) acceptances.set(envelope.eventId, envelope.aggregateId);
    }
    let faulted = 0;
    for (const [eventId, fault] of s.faults.get(CASE_SLA)!) {
      if (fault.kind === 'transient') continue;
      faulted += 1;
      expect(chains.get(acceptances.get(eventId)!), eventId).toBe(1);
    }
    expect(faulted).toBeGreaterThan(0);
  });

  it('never injects a fault into a status change of case-sla (it ignores them)', () => {
    const s = generateStream({ ...options, transientRate: 0.5 });
    const statusChanges = new Set(
      allRecords(s)
        .filter(({ r }) => r.label.kind === 'event' && r.value !== null && JSON.parse(r.value.toString()).eventType === CASE_STATUS_CHANGED)
        .map(({ r }) => (r.label.kind === 'event' ? r.label.eventId : '')),
    );
    for (const eventId of s.faults.get(CASE_SLA)!.keys()) expect(statusChanges.has(eventId)).toBe(false);
  });
});

describe('expectationUnder', () => {
  it('maps each fault to the final state it must cause', () => {
    expect(expectationUnder(undefined)).toEqual({ status: 'PROCESSED' });
    expect(expectationUnder({ kind: 'transient', via: 'retryable-error', failures: 2 })).toEqual({ status: 'PROCESSED' });
    expect(expectationUnder({ kind: 'exhaust' })).toEqual({ status: 'QUARANTINED', errorCode: 'MAX_ATTEMPTS_EXCEEDED' });
    expect(expectationUnder({ kind: 'permanent', via: 'non-retryable-error' })).toEqual({
      status: 'QUARANTINED',
      errorCode: INJECTED.PERMANENT,
    });
    expect(expectationUnder({ kind: 'permanent', via: 'check-violation' })).toEqual({
      status: 'QUARANTINED',
      errorCode: 'DB_INTEGRITY_VIOLATION',
    });
  });
});
