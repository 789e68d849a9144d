/**
 * The arguments of every ops command, validated with zod. The Lambda's event and the
 * CLI's flags both become `{ command, ...args }` and go through these same schemas, so a
 * typo is refused the same way on both paths (objects are strict: an unknown argument is
 * an error, not silently ignored — `--consumr x` must not widen a replay to everything).
 */
import { z } from 'zod';

/** A boolean from JSON (true/false) or from the CLI (a bare flag is true; "true"/"false" spelled out). */
const flag = z
  .union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')])
  .optional()
  .transform((v) => v ?? false);

const text = z.string().trim().min(1);
const count = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);
const datetime = z.iso.datetime({ offset: true });
const inboxId = z.uuid({ message: 'must be an inbox id (uuid)' });

/** Who runs the command and through what; not every command needs an actor. */
const caller = {
  actor: text.max(200).optional(),
  /** Set by the one-time schedules that schedule-replay creates. */
  source: z.literal('schedule').optional(),
};

export const REPLAY_DEFAULT_LIMIT = 1000;
export const REPLAY_MAX_LIMIT = 10_000;
export const PAGE_DEFAULT = 50;
export const PAGE_MAX = 1000;
/** The names schedule-replay gives its one-time schedules; the ops role may create no others. */
export const REPLAY_SCHEDULE_PREFIX = 'ops-replay-';

const replayFields = {
  ...caller,
  ids: z.array(inboxId).min(1).max(REPLAY_MAX_LIMIT).optional(),
  consumer: text.optional(),
  errorCode: text.optional(),
  eventType: text.optional(),
  /** quarantined_at >= from */
  from: datetime.optional(),
  /** quarantined_at < to */
  to: datetime.optional(),
  limit: count(REPLAY_DEFAULT_LIMIT, REPLAY_MAX_LIMIT),
  reason: text.max(1000).optional(),
};

type ReplayShape = { ids?: string[] | undefined; limit: number; consumer?: string | undefined; errorCode?: string | undefined; eventType?: string | undefined; from?: string | undefined; to?: string | undefined };

/** Exactly one way of selecting: ids, or a consumer with optional filters. */
function checkSelection(v: ReplayShape, ctx: z.core.$RefinementCtx): void {
  const filters = [v.errorCode, v.eventType, v.from, v.to].some((f) => f !== undefined);
  if (v.ids !== undefined && (v.consumer !== undefined || filters)) {
    ctx.addIssue({ code: 'custom', path: ['ids'], message: 'select by ids or by consumer and filters, not both' });
  }
  // Ids beyond the limit would be left QUARANTINED and reported as skipped for no reason
  // the operator could see: refuse them instead.
  const distinctIds = v.ids === undefined ? 0 : new Set(v.ids.map((id) => id.toLowerCase())).size;
  if (distinctIds > v.limit) {
    ctx.addIssue({ code: 'custom', path: ['ids'], message: `${distinctIds} ids but limit is ${v.limit}: raise limit or replay fewer ids` });
  }
  if (v.ids === undefined && v.consumer === undefined) {
    ctx.addIssue({ code: 'custom', path: ['consumer'], message: 'required unless ids are given' });
  }
  if (v.from !== undefined && v.to !== undefined && Date.parse(v.from) >= Date.parse(v.to)) {
    ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be after from' });
  }
}

export const schemas = {
  stats: z.strictObject({ ...caller, consumer: text.optional() }),
  quarantine: z.strictObject({ ...caller, consumer: text.optional() }),
  'quarantine-list': z.strictObject({
    ...caller,
    consumer: text.optional(),
    errorCode: text.optional(),
    eventType: text.optional(),
    limit: count(PAGE_DEFAULT, PAGE_MAX),
    cursor: text.optional(),
    includePayload: flag,
  }),
  replay: z.strictObject({ ...replayFields, dryRun: flag }).superRefine(checkSelection),
  'poison-list': z.strictObject({
    ...caller,
    consumer: text.optional(),
    includeResolved: flag,
    limit: count(PAGE_DEFAULT, PAGE_MAX),
    cursor: text.optional(),
  }),
  'poison-show': z.strictObject({ ...caller, id: z.uuid({ message: 'must be a poison id (uuid)' }) }),
  'poison-reingest': z.strictObject({
    ...caller,
    id: z.uuid({ message: 'must be a poison id (uuid)' }),
    dryRun: flag,
  }),
  pause: z.strictObject({ ...caller, consumer: text, reason: text.max(1000).optional() }),
  resume: z.strictObject({ ...caller, consumer: text, reason: text.max(1000).optional() }),
  'schedule-replay': z
    .strictObject({
      ...replayFields,
      /** When to run: ISO-8601 with an offset; stored as at(…) in UTC. */
      at: datetime,
      /**
       * The schedule's name; generated when absent. The ops role may create schedules named
       * ops-replay-* only (cdk/constructs/ops.ts), so any other name would fail in AWS.
       */
      name: z
        .string()
        .regex(/^[0-9a-zA-Z-_.]{1,64}$/, 'letters, digits, - _ . only, at most 64 characters')
        .startsWith(REPLAY_SCHEDULE_PREFIX, `must start with ${REPLAY_SCHEDULE_PREFIX}`)
        .optional(),
    })
    .superRefine(checkSelection),
} as const;

export type CommandName = keyof typeof schemas;
export type CommandArgs<C extends CommandName> = z.output<(typeof schemas)[C]>;

export const COMMAND_NAMES = Object.keys(schemas) as CommandName[];

export function isCommandName(name: unknown): name is CommandName {
  return typeof name === 'string' && Object.hasOwn(schemas, name);
}
