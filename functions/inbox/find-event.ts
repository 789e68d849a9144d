/**
 * Finding one event's inbox row: seed 000's findByConsumerAndEventId.
 */
import type { Queryable } from '../lib/db';

/** The inbox id of a consumer's event, if the inbox holds it. */
export async function inboxIdOf(q: Queryable, consumerName: string, eventId: string): Promise<string | undefined> {
  const [row] = await q<{ inbox_id: string }[]>`
    select inbox_id from integration.consumer_inbox
    where consumer_name = ${consumerName} and event_id = ${eventId}`;
  return row?.inbox_id;
}
