import { describe, expect, it } from 'vitest';
import { outboxEventId, uuidV5 } from '../../../functions/outbox/event-id';

describe('outbox event ids', () => {
  it('uuidV5 matches RFC 9562’s name-based UUID (the DNS namespace example)', () => {
    expect(uuidV5('6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'www.example.com')).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
  });

  it('the same emission always derives the same id', () => {
    expect(outboxEventId('case-sla', 'evt_1', 'regulatory.case.sla-obligation-opened.v1', 0)).toBe(
      outboxEventId('case-sla', 'evt_1', 'regulatory.case.sla-obligation-opened.v1', 0),
    );
  });

  it('every part of the emission changes the id, and parts cannot run into each other', () => {
    const ids = new Set([
      outboxEventId('case-sla', 'evt_1', 'type', 0),
      outboxEventId('case-sla', 'evt_1', 'type', 1),
      outboxEventId('case-sla', 'evt_2', 'type', 0),
      outboxEventId('case-slb', 'evt_1', 'type', 0),
      outboxEventId('case-sla', 'evt_1', 'other', 0),
      // "a" + "b,c" against "a,b" + "c": the JSON encoding keeps them apart.
      outboxEventId('a', 'b,c', 'type', 0),
      outboxEventId('a,b', 'c', 'type', 0),
    ]);
    expect(ids.size).toBe(7);
  });
});
