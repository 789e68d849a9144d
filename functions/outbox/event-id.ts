/**
 * The event id of an emitted event, derived from what emitted it rather than drawn at
 * random: processing the same inbox row again (a replay of a quarantined row, a row whose
 * first attempt rolled back) emits the same id, so downstream deduplicates it like any
 * redelivery, and the outbox's unique key refuses a second, different event.
 */
import { createHash } from 'node:crypto';

/** This project's name-based UUID namespace (RFC 9562 §5.5); fixed forever, or every id changes. */
export const OUTBOX_EVENT_NAMESPACE = '82d3c468-3bb3-4253-9dd2-171da18f61df';

/** A version 5 (SHA-1, name-based) UUID of `name` in `namespace`. */
export function uuidV5(namespace: string, name: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  if (ns.length !== 16) throw new TypeError(`not a UUID: ${namespace}`);
  const bytes = createHash('sha1').update(ns).update(name, 'utf8').digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The id of the `ordinal`-th event of `eventType` that `consumerName` emitted while
 * processing `sourceEventId`. The parts are JSON-encoded, so no two tuples share a name.
 */
export function outboxEventId(consumerName: string, sourceEventId: string, eventType: string, ordinal: number): string {
  return uuidV5(OUTBOX_EVENT_NAMESPACE, JSON.stringify([consumerName, sourceEventId, eventType, ordinal]));
}
