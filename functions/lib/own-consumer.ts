/**
 * A consumer's name as a statement on a table under the consumer row-level security
 * policy (integration.consumer_inbox, integration.consumer_lane) compares it: an InitPlan,
 * `(select $1::text)`, like the policy's own lookup of the role's consumer.
 *
 * The planner estimates `consumer_name = <an InitPlan's value>` as 1 / n_distinct and
 * `consumer_name = <constant>` by the constant's frequency. Beside a constant, statistics
 * taken while a few lanes of that one consumer existed (n_distinct a fraction of the rows,
 * the name's frequency 1) make the policy's condition look like the selective one: it is
 * not an index condition, so the planner read the whole table and sorted it rather than
 * take the oldest due lanes from their index. Written alike, both conditions weigh the
 * same and the statement's own is the index condition, whatever the statistics say.
 */
import type { Queryable } from './db';

export function ownConsumer(q: Queryable, consumerName: string) {
  return q`(select ${consumerName}::text)`;
}
