import type postgres from 'postgres';
import type { Queryable } from './db';

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

/** Outbox lanes of any consumers in lock order: consumer, type, id, each as compareLaneKeys (migration 0160's key). */
export function byConsumerLaneKey(a: LaneKey & { consumerName: string }, b: LaneKey & { consumerName: string }): number {
  return compareLaneKeys(a.consumerName, b.consumerName) || byLaneKey(a, b);
}

/**
 * The lane key's columns, as a row of an inbox row or a lane: the leading columns of
 * consumer_inbox_open_lane_idx and consumer_inbox_in_flight_lane_idx (migration 0150).
 */
export const LANE_KEY_COLUMNS = ['consumer_name', 'aggregate_type', 'aggregate_id'] as const;

/**
 * The collation of those index columns and of every lookup by lane (the lock order's, too).
 * A condition uses an index column only in the column's own collation, so no other index
 * of the inbox (the dedupe key, consumer_inbox_aggregate_idx: default collation) can serve
 * a lane lookup, whatever statistics the planner has: on statistics taken before a backlog
 * ("an aggregate has one row") it would as soon read a hot aggregate's whole history.
 */
export const LANE_KEY_COLLATION = 'C';

/** The lane key of the row `alias`, `(consumer_name, aggregate_type, aggregate_id)`. */
export function laneKeyOf(q: Queryable, alias: string) {
  const [consumer, type, id] = LANE_KEY_COLUMNS.map((column) => q(`${alias}.${column}`));
  return q`(${consumer}, ${type}, ${id})`;
}

/**
 * A lane key to look up, from its three values (column references or parameters), in
 * LANE_KEY_COLLATION: compare `laneKeyOf(row) = laneKey(...)`. A row comparison is one
 * text equality per column, which is leakproof: under the inbox's row-level security
 * policy its conditions still reach the index (an array's equality would not, and would be
 * planned without statistics).
 */
export function laneKey(q: Queryable, consumer: Fragment, type: Fragment, id: Fragment) {
  const c = q(LANE_KEY_COLLATION);
  return q`(${consumer} collate ${c}, ${type} collate ${c}, ${id} collate ${c})`;
}

/** A lane key value: an SQL fragment or a column reference (`q('g.aggregate_id')`). */
type Fragment = postgres.Fragment | postgres.Helper<string>;

/** The row `alias` is in the lane of the row `other` (an inbox row, or a lane): an index condition on `alias`. */
export function sameLane(q: Queryable, alias: string, other: string) {
  const [consumer, type, id] = LANE_KEY_COLUMNS.map((column) => q(`${other}.${column}`));
  return q`${laneKeyOf(q, alias)} = ${laneKey(q, consumer!, type!, id!)}`;
}
