/**
 * docs/configuration.md, generated from the zod schemas that parse the configuration: the
 * functions' environment (functions/lib/config.ts) and a stage's keys (cdk/config.ts). Each
 * field's meaning is its schema's description (`.describe()`), its default and what it accepts
 * are read from the schema itself, so the reference cannot drift from what is parsed.
 * `npm run docs:config` writes it; test/unit/configuration-reference.test.ts fails when the file
 * differs or a field has no description.
 */
import { z } from 'zod';
import { stageSchema } from '../cdk/config';
import { ENVIRONMENT, READ_BY_OTHERS } from '../functions/lib/config';

export interface Row {
  /** The variable, or the stage key's path (`database.maxCapacityAcu`, `consumers.<name>.stack`). */
  key: string;
  default?: string;
  accepts: string;
  description?: string;
}

// What zod 4 keeps of a schema: its definition (type, wrapped schemas, checks).
interface Internals {
  _zod: { def: Record<string, any> & { type: string } };
}
const defOf = (s: z.ZodType) => (s as unknown as Internals)._zod.def;

interface Facts {
  description?: string;
  default?: unknown;
  accepts?: string;
  shape?: Record<string, z.ZodType>;
  record?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  discriminator?: string;
}

/** What one schema says, through its wrappers (optional, default, pipe…), outermost first. */
function factsOf(schema: z.ZodType, acc: Facts = {}): Facts {
  const meta = z.globalRegistry.get(schema) as { description?: string; accepts?: string } | undefined;
  acc.description ??= meta?.description;
  acc.accepts ??= meta?.accepts;
  const def = defOf(schema);
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'readonly':
      return factsOf(def.innerType, acc);
    case 'default':
    case 'prefault':
      if (!('default' in acc)) acc.default = def.defaultValue;
      return factsOf(def.innerType, acc);
    case 'pipe':
      // A value transformed into another shape is documented as written (network); a text
      // parsed into a number or list, as what it must parse to.
      return factsOf(defOf(def.out).type === 'transform' ? def.in : def.out, acc);
    case 'number': {
      // The checks as declared: .int(), .min(n), .max(n).
      const checks = ((def.checks ?? []) as { _zod: { def: Record<string, unknown> } }[]).map((c) => c._zod.def);
      const bound = (check: string) => checks.find((c) => c.check === check)?.value as number | undefined;
      const [minimum, maximum] = [bound('greater_than'), bound('less_than')];
      const kind = checks.some((c) => c.format === 'safeint') ? 'whole number' : 'number';
      acc.accepts ??= minimum !== undefined && maximum !== undefined ? `${kind}, ${minimum}–${maximum}` : kind;
      return acc;
    }
    case 'string':
      acc.accepts ??= 'text';
      return acc;
    case 'boolean':
      acc.accepts ??= '`true`, `false`';
      return acc;
    case 'enum':
      acc.accepts ??= Object.values(def.entries as Record<string, string>)
        .map((v) => `\`${v}\``)
        .join(', ');
      return acc;
    case 'literal':
      acc.accepts ??= (def.values as unknown[]).map((v) => `\`${String(v)}\``).join(', ');
      return acc;
    case 'union':
      if (def.discriminator === undefined) {
        acc.accepts ??= (def.options as z.ZodType[]).map((o) => factsOf(o).accepts).join(', or ');
        return acc;
      }
      acc.options = def.options;
      acc.discriminator = def.discriminator;
      return acc;
    case 'array': {
      const element = defOf(def.element).type === 'object' ? undefined : factsOf(def.element).accepts;
      acc.accepts ??= element === undefined ? 'list' : `list of ${element}`;
      if (element === undefined) acc.element = def.element;
      return acc;
    }
    case 'object':
      acc.accepts ??= 'object';
      acc.shape = def.shape;
      return acc;
    case 'record':
      acc.accepts ??= 'object by name';
      acc.record = def.valueType;
      return acc;
    default:
      acc.accepts ??= 'any';
      return acc;
  }
}

function shown(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'object' && value !== null && Object.keys(value).length === 0 && !Array.isArray(value)) return undefined;
  return `\`${JSON.stringify(value)}\``;
}

/** One row per environment variable of `shape`, in its order. */
export function environmentRows(shape: Record<string, z.ZodType>): Row[] {
  return Object.entries(shape).map(([key, schema]) => {
    const f = factsOf(schema);
    return { key, ...(shown(f.default) ? { default: shown(f.default)! } : {}), accepts: f.accepts ?? 'text', description: f.description };
  });
}

/**
 * One row per leaf of a stage schema, by path. `except` names, per path of a record's entry,
 * the keys documented elsewhere (a consumer's overrides are consumerDefaults' keys).
 */
export function stageRows(schema: z.ZodType, except: Record<string, readonly string[]> = {}): Row[] {
  const rows: Row[] = [];
  const walk = (s: z.ZodType, path: string, note?: string) => {
    const f = factsOf(s);
    const withNote = (d: string | undefined) => (d === undefined || note === undefined ? d : `${d} (${note})`);
    const fields = f.shape ?? (f.record ? factsOf(f.record).shape : f.element ? factsOf(f.element).shape : undefined);
    if (f.options !== undefined) {
      unionRows(f, path, note).forEach((r) => rows.push(r));
      return;
    }
    if (fields === undefined) {
      rows.push({
        key: path,
        ...(shown(f.default) ? { default: shown(f.default)! } : {}),
        accepts: f.accepts!,
        description: withNote(f.description),
      });
      return;
    }
    const prefix = f.record ? `${path}.<name>` : f.element ? `${path}[]` : path;
    const skip = new Set(except[prefix] ?? []);
    for (const [key, field] of Object.entries(fields)) {
      if (!skip.has(key)) walk(field, prefix === '' ? key : `${prefix}.${key}`, note);
    }
  };
  // A discriminated union: its discriminator once, then each option's other keys, noted with the option.
  const unionRows = (f: Facts, path: string, note: string | undefined): Row[] => {
    const options = f.options!.map((o) => factsOf(o).shape ?? {});
    const discriminator = f.discriminator!;
    const values = options.map((o) => defOf(o[discriminator]!).values[0] as string);
    const out: Row[] = [
      {
        key: `${path}.${discriminator}`,
        ...(shown(f.default) ? { default: shown((f.default as Record<string, unknown>)[discriminator])! } : {}),
        accepts: values.map((v) => `\`${v}\``).join(', '),
        description: f.description,
      },
    ];
    const seen = new Set<string>([discriminator]);
    options.forEach((shape) => {
      for (const [key, field] of Object.entries(shape)) {
        if (seen.has(key)) continue;
        seen.add(key);
        const holders = values.filter((_, i) => key in options[i]!);
        const where =
          holders.length === values.length ? note : [note, `${discriminator} ${holders.join(' or ')}`].filter(Boolean).join('; ');
        const sub = stageRows(z.object({ [key]: field }));
        sub.forEach((r) =>
          out.push({ ...r, key: `${path}.${r.key}`, ...(where ? { description: r.description && `${r.description} (${where})` } : {}) }),
        );
      }
    });
    return out;
  };
  walk(schema, '');
  return rows;
}

const cell = (text: string | undefined) => (text ?? '').replace(/\|/g, '\\|').replace(/\n/g, ' ');

function table(header: string, rows: readonly Row[]): string[] {
  return [
    `| ${header} | default | accepts | meaning |`,
    '|---|---|---|---|',
    ...rows.map((r) => `| \`${r.key}\` | ${cell(r.default ?? '')} | ${cell(r.accepts)} | ${cell(r.description)} |`),
  ];
}

/** A consumer's entry in a stage overrides any of consumerDefaults' keys. */
const STAGE_EXCEPT = { 'consumers.<name>': Object.keys(factsOf(factsOf(stageSchema).shape!.consumerDefaults!).shape!) };

export function configurationRows(): { environment: Row[]; stage: Row[] } {
  return { environment: environmentRows(ENVIRONMENT.shape), stage: stageRows(stageSchema, STAGE_EXCEPT) };
}

/** Fields with no description: each must say what it means. */
export function undocumented(): string[] {
  const { environment, stage } = configurationRows();
  return [
    ...environment.filter((r) => !r.description).map((r) => `environment: ${r.key}`),
    ...stage.filter((r) => !r.description).map((r) => `stage: ${r.key}`),
  ];
}

export function configurationReference(): string {
  const { environment, stage } = configurationRows();
  const others: Row[] = Object.entries(READ_BY_OTHERS).map(([key, v]) => ({ key, accepts: v.readBy, description: v.description }));
  return [
    '# Configuration reference',
    '',
    '<!-- Generated by `npm run docs:config` from the zod schemas (tools/config-reference.ts): edit the',
    '     descriptions in functions/lib/config*.ts and cdk/config.ts, not this file. -->',
    '',
    'Two places configure the system: the **stage** (`cdk.json` → `context.stages.<stage>`, read at',
    'synth by `cdk/config.ts`) and the **functions’ environment** (read once at cold start by',
    '`functions/lib/config.ts`, most of it set by the CDK app from the stage). A value that does not',
    'parse fails synth, or the cold start, naming its path or variable. Per-consumer behaviour',
    '(handlers, retry policy, retention, quarantine policy) lives in the consumer’s declaration',
    '(`functions/framework/types.ts`), not here.',
    '',
    '## Stage keys',
    '',
    'All keys but `msk` are optional. A consumer’s entry, `consumers.<name>`, takes any key of',
    '`consumerDefaults` as well as its own.',
    '',
    ...table('key', stage),
    '',
    '## Environment variables',
    '',
    'Unset and empty values take the default.',
    '',
    ...table('variable', environment),
    '',
    '### Set by the CDK app, read by others',
    '',
    '| variable | read by | meaning |',
    '|---|---|---|',
    ...others.map((r) => `| \`${r.key}\` | ${cell(r.accepts)} | ${cell(r.description)} |`),
    '',
  ].join('\n');
}
