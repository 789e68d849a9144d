/**
 * The consumer declarations: the one place a team adds a consumer, one line in CONSUMERS
 * naming the declaration its own module exports. The CDK app builds one construct per
 * declaration, bundles each consumer's functions with that consumer's module alone, and the
 * platform's functions with the manifest of them all (cdk/function-entries.ts); tests,
 * scripts and tools read them here.
 */
import { ConfigError } from '../lib/config';
import { caseProjection } from './case-projection';
import { caseSla } from './case-sla';
import { notificationService } from './notification-service';
import { manifestOf, type ConsumerDeclaration, type ConsumerManifest } from '../framework';

export const CONSUMERS: readonly ConsumerDeclaration[] = [caseProjection, caseSla, notificationService];

/**
 * The manifest the platform's functions read, built as synth builds it. No stage says which
 * tables are shared here: locally every table the declarations name is granted as declared.
 */
export function localManifest(): ConsumerManifest {
  const tables = CONSUMERS.flatMap((c) => Object.keys(c.tables ?? {}));
  return manifestOf(CONSUMERS, { sharedTables: tables });
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
