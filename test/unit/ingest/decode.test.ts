import { describe, expect, it } from 'vitest';
import { getConsumer } from '../../../functions/consumers';
import { normalizeEnvelope } from '../../../functions/framework/envelopes';
import { decodeHeaders, decodeKey, decodeRecord } from '../../../functions/ingest/decode';
import { PoisonCodes } from '../../../functions/ingest/poison-codes';
import { failEveryPartition } from '../../../functions/ingest/ingest';
import { batchItemFailure, mskEvent, mskRecord, recordsOf, spreadRecords } from '../../../tools/msk-events';

const canonicalConsumer = getConsumer('case-projection');
const snakeConsumer = getConsumer('notification-service');
const limits = { maxPayloadBytes: 1024 };

const canonical = {
  eventId: 'evt_1',
  eventType: 'regulatory.case.accepted.v1',
  eventVersion: 1,
  occurredAt: '2026-07-03T09:15:30Z',
  producer: 'case-command-service',
  aggregateType: 'case',
  aggregateId: 'case_123',
  aggregateVersion: 17,
  payload: { caseId: 'case_123' },
};

const snake = {
  event_id: 'A3F0C2D4-1111-4222-8333-944455556666',
  event_type: 'payment.completed',
  event_version: 1,
  org_id: '7D1F2C4E-8A9B-4C3D-9E8F-1A2B3C4D5E6F',
  aggregate_id: 'pay_1',
  occurred_at: '2026-07-03T09:15:30+02:00',
  payload: {},
};

describe('normalizeEnvelope', () => {
  it('normalizes the canonical dialect', () => {
    expect(normalizeEnvelope(canonicalConsumer, canonical)).toEqual({
      ok: true,
      envelope: {
        eventId: 'evt_1',
        eventType: 'regulatory.case.accepted.v1',
        eventVersion: 1,
        occurredAt: '2026-07-03T09:15:30Z',
        producer: 'case-command-service',
        correlationId: null,
        causationId: null,
        aggregateType: 'case',
        aggregateId: 'case_123',
        aggregateVersion: 17,
        partitionKey: null,
        tenantId: null,
      },
    });
  });

  it('normalizes snake_case: lower-case uuids, org_id as the tenant, the declaration supplying the rest', () => {
    const result = normalizeEnvelope(snakeConsumer, snake);
    expect(result).toMatchObject({
      ok: true,
      envelope: {
        eventId: 'a3f0c2d4-1111-4222-8333-944455556666',
        tenantId: '7d1f2c4e-8a9b-4c3d-9e8f-1a2b3c4d5e6f',
        aggregateType: 'payment',
        producer: 'payment-service',
        aggregateVersion: null,
      },
    });
  });

  it('names the field paths that fail, never their values', () => {
    const result = normalizeEnvelope(snakeConsumer, { ...snake, event_id: 'secret-value', event_version: -1 });
    expect(result.ok).toBe(false);
    const message = (result as { message: string }).message;
    expect(message).toMatch(/^event_id: .*; event_version: /);
    expect(message).not.toContain('secret-value');
  });

  it('requires what neither the canonical envelope nor the declaration supplies', () => {
    const { producer: _, ...noProducer } = canonical;
    expect(normalizeEnvelope(canonicalConsumer, noProducer)).toEqual({
      ok: false,
      message: 'producer: required (the envelope lacks it and the consumer declares no default)',
    });
  });

  it('refuses an eventVersion the integer column cannot hold', () => {
    expect(normalizeEnvelope(canonicalConsumer, { ...canonical, eventVersion: 2 ** 31 }).ok).toBe(false);
  });
});

describe('decodeRecord', () => {
  const at = (spec: Parameters<typeof mskRecord>[0]['value'] | { raw: string }) =>
    decodeRecord(
      mskRecord({
        topic: 't',
        partition: 0,
        offset: 1,
        ...(spec !== null && typeof spec === 'object' && 'raw' in spec ? { rawValue: spec.raw as string } : { value: spec as never }),
      }),
      canonicalConsumer,
      limits,
    );

  it('turns a valid record into an inbox row that keeps the JSON text', () => {
    const d = at(canonical);
    expect(d).toMatchObject({ kind: 'valid', row: { eventId: 'evt_1', topic: 't', partition: 0, offset: 1, aggregateVersion: 17 } });
    expect(d.kind === 'valid' && d.row.envelopeJson).toBe(JSON.stringify(canonical));
  });

  it.each([
    ['a base64 value with a stray character', { raw: 'eyJh\nIjoxfQ==' }, PoisonCodes.INVALID_BASE64],
    ['base64url', { raw: 'eyJh-_oxfQ==' }, PoisonCodes.INVALID_BASE64],
    ['overlong UTF-8', Buffer.from([0xc0, 0xaf]), PoisonCodes.INVALID_UTF8],
    ['a UTF-16 surrogate encoded in UTF-8', Buffer.from([0xed, 0xa0, 0x80]), PoisonCodes.INVALID_UTF8],
    ['JSON null', 'null', PoisonCodes.NOT_AN_OBJECT],
    ['a value one byte over the limit', 'x'.repeat(1025), PoisonCodes.PAYLOAD_TOO_LARGE],
  ])('poisons %s', (_name, value, code) => {
    expect(at(value as never)).toMatchObject({ kind: 'poison', row: { errorCode: code } });
  });

  it('accepts a value exactly at the limit', () => {
    const body = JSON.stringify({ ...canonical, payload: { pad: '' } });
    const padded = JSON.stringify({ ...canonical, payload: { pad: 'x'.repeat(1024 - body.length) } });
    expect(Buffer.byteLength(padded)).toBe(1024);
    expect(at(padded).kind).toBe('valid');
  });

  it('accepts an escaped backslash before u0000 and a paired surrogate escape', () => {
    const text = JSON.stringify({ ...canonical, payload: { a: '\\u0000', b: '😀' } }).replace('😀', '\\ud83d\\ude00');
    expect(at(text).kind).toBe('valid');
  });
});

describe('keys and headers', () => {
  it('keeps a UTF-8 key as text and any other as base64', () => {
    expect(decodeKey(undefined)).toEqual({ recordKey: null, recordKeyEncoding: 'utf8' });
    expect(decodeKey(Buffer.from('case_1').toString('base64'))).toEqual({ recordKey: 'case_1', recordKeyEncoding: 'utf8' });
    expect(decodeKey(Buffer.from('a\u0000b').toString('base64'))).toEqual({ recordKey: 'YQBi', recordKeyEncoding: 'base64' });
  });

  it('decodes header byte arrays, repeated names in order', () => {
    expect(decodeHeaders([{ a: [104, 105] }, { a: [0xff] }, { b: [] }])).toEqual({ a: ['hi', { base64: '/w==' }], b: '' });
    // The ASCII shortcut and the Buffer path agree on the edges: NUL, UTF-8, values that are not bytes.
    expect(
      decodeHeaders([
        { nul: [104, 0] },
        { utf8: [0xc3, 0xa9] },
        { wide: [300] },
        { text: ['65'] as unknown as number[] },
        { ctl: [9, 127] },
      ]),
    ).toEqual({
      nul: { base64: 'aAA=' },
      utf8: 'é',
      wide: ',',
      text: 'A',
      ctl: '\t\u007f',
    });
    expect(decodeHeaders([{ long: Array.from({ length: 300 }, () => 120) }])).toEqual({ long: 'x'.repeat(300) });
  });
});

describe('MSK event builders', () => {
  it('group records by "<topic>-<partition>" in offset order, and report each partition at its first offset', () => {
    const records = spreadRecords({ topic: 'orders', partitions: 3, count: 7, firstOffset: 10, value: (n) => ({ n }) });
    const event = mskEvent([...records].reverse());

    expect(event.eventSource).toBe('aws:kafka');
    expect(Object.keys(event.records).sort()).toEqual(['orders-0', 'orders-1', 'orders-2']);
    expect(event.records['orders-0']!.map((r) => r.offset)).toEqual([10, 11, 12]);
    expect(recordsOf(event)).toHaveLength(7);
    expect(Buffer.from(event.records['orders-1']![0]!.value!, 'base64').toString()).toBe('{"n":1}');
    expect(failEveryPartition(event).sort((a, b) => a.itemIdentifier.partition.localeCompare(b.itemIdentifier.partition))).toEqual([
      batchItemFailure('orders', 0, 10),
      batchItemFailure('orders', 1, 10),
      batchItemFailure('orders', 2, 10),
    ]);
  });

  it('builds tombstones without a value and headers as byte arrays', () => {
    expect(mskRecord({ topic: 't', partition: 0, offset: 0, value: null, headers: { h: 'ok' } })).toMatchObject({
      headers: [{ h: [111, 107] }],
    });
    expect('value' in mskRecord({ topic: 't', partition: 0, offset: 0, value: null })).toBe(false);
  });
});
