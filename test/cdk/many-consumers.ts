/**
 * Test-only consumer declarations for the stage-size tests: clones of case-projection (one
 * topic, deferred, a worker and its schedule), as many as a test asks for, placed twelve to a
 * consumer stack in the order they were added, as a platform's teams would place them.
 */
import type { DeclaredConsumer } from '../../cdk/config';
import { CONSUMERS } from '../../functions/consumers/index';

export const CONSUMERS_PER_TEST_STACK = 12;

export function teamConsumer(i: number): DeclaredConsumer {
  const n = String(i + 1).padStart(2, '0');
  return {
    name: `team-consumer-${n}`,
    topics: [`team.events.v${n}`],
    mode: 'deferred',
    stack: `team-${Math.floor(i / CONSUMERS_PER_TEST_STACK) + 1}`,
  };
}

/**
 * The consumers the project ships, as the fixtures of the tests that count what each one adds
 * (connections, pollers, resources): the consumers a team lists later change no such count.
 */
export const SHIPPED_CONSUMERS = CONSUMERS.filter((c) => ['case-projection', 'case-sla', 'notification-service'].includes(c.name));

/** The shipped consumers plus `count` test consumers. */
export function manyConsumers(count: number): DeclaredConsumer[] {
  return [...SHIPPED_CONSUMERS, ...Array.from({ length: count }, (_, i) => teamConsumer(i))];
}
