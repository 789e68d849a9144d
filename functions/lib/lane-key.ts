/**
 * The key of a lane, the inbox's (integration.consumer_lane) and the outbox's
 * (integration.outbox_lane) alike, and the one order in which statements lock several:
 * UTF-8 byte order, which is `collate "C"`: every statement that locks several lanes locks
 * them in this order (consumer_inbox's lane triggers sort the same way), so two of them
 * never deadlock.
 */
function compareLaneKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

export interface LaneKey {
  aggregateType: string;
  aggregateId: string;
}

/** Lanes of one consumer (or outbox lanes) in lock order: type, then id, each as compareLaneKeys. */
export function byLaneKey(a: LaneKey, b: LaneKey): number {
  return compareLaneKeys(a.aggregateType, b.aggregateType) || compareLaneKeys(a.aggregateId, b.aggregateId);
}
