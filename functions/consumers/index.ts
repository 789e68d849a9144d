/**
 * The consumer declarations: the one place a team adds a consumer. Read by the functions
 * (CONSUMER_NAME selects one) and by the CDK app (one construct per declaration).
 */
import { ConfigError } from '../lib/config';
import { caseProjection } from './case-projection';
import { caseSla } from './case-sla';
import { notificationService } from './notification-service';
import type { ConsumerDeclaration } from '../framework';

export const CONSUMERS: readonly ConsumerDeclaration[] = [caseProjection, caseSla, notificationService];

for (const consumer of CONSUMERS) {
  // Inline rows are processed in the ingest transaction, outside the lanes that hold an aggregate.
  if (consumer.mode === 'inline' && consumer.quarantinePolicy === 'hold-aggregate') {
    throw new ConfigError(`Invalid consumer "${consumer.name}": quarantinePolicy hold-aggregate needs mode deferred`);
  }
}

export function findConsumer(name: string): ConsumerDeclaration | undefined {
  return CONSUMERS.find((c) => c.name === name);
}

/** The declaration for a configured name; an unknown name is a configuration error. */
export function getConsumer(name: string): ConsumerDeclaration {
  const consumer = findConsumer(name);
  if (consumer === undefined) {
    throw new ConfigError(
      `Invalid configuration: CONSUMER_NAME: unknown consumer "${name}" (known: ${CONSUMERS.map((c) => c.name).join(', ')})`,
    );
  }
  return consumer;
}

export type { ConsumerDeclaration } from '../framework';
