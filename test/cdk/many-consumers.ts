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

/** The shipped consumers plus `count` test consumers. */
export function manyConsumers(count: number): DeclaredConsumer[] {
  return [...CONSUMERS, ...Array.from({ length: count }, (_, i) => teamConsumer(i))];
}
