/**
 * The consumer manifest: what the platform's functions (migrate, ops, reaper) and each
 * consumer's relay read of the declarations — data only, no handler code. The CDK app
 * builds it at synth and bundles it into those functions (cdk/function-entries.ts), so
 * they load no team's module; locally (tests, scripts, tools) it is built from CONSUMERS
 * by the same function. A consumer's ingest and worker bundle its own declaration instead.
 *
 * A table a declaration names belongs to that consumer: two declarations naming one table
 * are refused unless the stage says the table is shared (`sharedTables`, docs/stacks.md).
 */
import { ConfigError } from '../lib/config';
import type { ConsumerDeclaration } from './types';

/** The data fields of a declaration the platform reads (JSON: it is written into bundles). */
export const MANIFEST_FIELDS = [
  'name',
  'topics',
  'dialect',
  'mode',
  'envelopeDefaults',
  'retry',
  'retention',
  'quarantinePolicy',
  'tables',
  'emits',
  'stack',
] as const satisfies readonly (keyof ConsumerDeclaration)[];

export type ConsumerManifestEntry = Pick<ConsumerDeclaration, (typeof MANIFEST_FIELDS)[number]>;

export type ConsumerManifest = readonly ConsumerManifestEntry[];

/** One declaration's manifest entry: its data fields, as JSON would carry them. */
export function manifestEntryOf(declaration: ConsumerManifestEntry): ConsumerManifestEntry {
  const entry: Record<string, unknown> = {};
  for (const field of MANIFEST_FIELDS) {
    if (declaration[field] !== undefined) entry[field] = declaration[field];
  }
  return JSON.parse(JSON.stringify(entry)) as ConsumerManifestEntry;
}

/** What is wrong with a set of declarations, as sentences (empty: nothing). */
export function declarationProblems(
  declarations: readonly Pick<ConsumerDeclaration, 'name' | 'mode' | 'quarantinePolicy' | 'tables'>[],
  options: { sharedTables: readonly string[] },
): string[] {
  const problems: string[] = [];
  const names = new Set<string>();
  const owners = new Map<string, string[]>();
  for (const d of declarations) {
    if (names.has(d.name)) problems.push(`consumer "${d.name}" is declared twice`);
    names.add(d.name);
    // Inline rows are processed in the ingest transaction, outside the lanes that hold an aggregate.
    if (d.mode === 'inline' && d.quarantinePolicy === 'hold-aggregate') {
      problems.push(`consumer "${d.name}": quarantinePolicy hold-aggregate needs mode deferred`);
    }
    for (const table of Object.keys(d.tables ?? {})) owners.set(table, [...(owners.get(table) ?? []), d.name]);
  }
  const shared = new Set(options.sharedTables);
  for (const [table, by] of owners) {
    if (by.length > 1 && !shared.has(table)) {
      problems.push(
        `table "${table}" is named by consumers ${by.map((n) => `"${n}"`).join(' and ')}: a table belongs to one consumer, unless the stage lists it in sharedTables`,
      );
    }
  }
  return problems;
}

/** The manifest of `declarations`; a ConfigError when they do not fit together. */
export function manifestOf(declarations: readonly ConsumerManifestEntry[], options: { sharedTables: readonly string[] }): ConsumerManifest {
  const problems = declarationProblems(declarations, options);
  if (problems.length > 0) throw new ConfigError(`Invalid consumer declarations:\n  ${problems.join('\n  ')}`);
  return declarations.map(manifestEntryOf);
}

/** The entry named `name`; an unknown name is a configuration error. */
export function manifestEntry(manifest: ConsumerManifest, name: string): ConsumerManifestEntry {
  const entry = manifest.find((c) => c.name === name);
  if (entry === undefined) {
    throw new ConfigError(
      `Invalid configuration: CONSUMER_NAME: unknown consumer "${name}" (known: ${manifest.map((c) => c.name).join(', ')})`,
    );
  }
  return entry;
}

/**
 * The declaration named `name` among a consumer module's exports (a declaration, or an array
 * of them): how a consumer's generated entry (cdk/function-entries.ts) takes its own.
 */
export function consumerNamed(exports: Readonly<Record<string, unknown>>, name: string): ConsumerDeclaration {
  const isNamed = (v: unknown): v is ConsumerDeclaration =>
    typeof v === 'object' && v !== null && (v as { name?: unknown }).name === name && 'handlers' in v;
  for (const value of Object.values(exports)) {
    if (isNamed(value)) return value;
    if (Array.isArray(value)) {
      const found = value.find(isNamed);
      if (found !== undefined) return found;
    }
  }
  throw new ConfigError(`Invalid configuration: the consumer's module exports no declaration named "${name}"`);
}
