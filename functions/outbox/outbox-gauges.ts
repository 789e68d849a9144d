/**
 * The outbox's gauges per emitting consumer: how many events wait to be published, and how
 * long the oldest has waited (0 when none). Reads the unpublished partial index only.
 */
import type { Queryable } from '../lib/db';

export interface OutboxGauges {
  consumer_name: string;
  depth: number;
  oldest_unpublished_age_seconds: number;
}

export async function readOutboxGauges(q: Queryable, consumerNames: readonly string[]): Promise<OutboxGauges[]> {
  if (consumerNames.length === 0) return [];
  return q<OutboxGauges[]>`
    select c.consumer_name,
           g.depth,
           coalesce(extract(epoch from now() - g.oldest), 0)::float8 as oldest_unpublished_age_seconds
    from unnest(${[...consumerNames]}::text[]) as c(consumer_name)
    cross join lateral (
      select count(*)::int as depth, min(o.created_at) as oldest
      from integration.outbox o
      where o.consumer_name = c.consumer_name and o.published_at is null
    ) g
    order by c.consumer_name`;
}
