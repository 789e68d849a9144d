/**
 * Test-only consumer declarations for the stage-size tests (./fixtures/team-consumers.ts):
 * as many as a test asks for, placed twelve to a consumer stack in the order they were
 * added, as a platform's teams would place them.
 */
import type { DeclaredConsumer } from '../../cdk/config';
import { CONSUMERS } from '../../functions/consumers/index';
import { CONSUMERS_PER_TEST_STACK, TEAM_CONSUMERS } from './fixtures/team-consumers';

export { CONSUMERS_PER_TEST_STACK };

export function teamConsumer(i: number): DeclaredConsumer {
  return { ...TEAM_CONSUMERS[i]!, source: { file: 'test/cdk/fixtures/team-consumers.ts' } };
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
