/**
 * The pieces the commands' argument schemas are built from (zod). The Lambda's event and
 * the CLI's flags both become `{ command, ...args }` and go through the same schema, so a
 * typo is refused the same way on both paths (objects are strict: an unknown argument is
 * an error, not silently ignored — `--consumr x` must not widen a replay to everything).
 */
import { z } from 'zod';
import type { Since } from './queries/since';

/** A boolean from JSON (true/false) or from the CLI (a bare flag is true; "true"/"false" spelled out). */
export const flag = z
  .union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')])
  .optional()
  .transform((v) => v ?? false);

export const text = z.string().trim().min(1);
export const reasonText = text.max(1000);
export const count = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);
export const datetime = z.iso.datetime({ offset: true });
export const inboxId = z.uuid({ message: 'must be an inbox id (uuid)' });
export const poisonId = z.uuid({ message: 'must be a poison id (uuid)' });

/**
 * Who runs the command; not every command needs an actor. Where from (cli, lambda) is the
 * caller's to know, never the event's to claim (command.ts, Invocation).
 */
export const caller = {
  actor: text.max(200).optional(),
};

/**
 * The start of a time window: a duration back from now (`90s`, `15m`, `6h`, `7d`) or an
 * ISO-8601 instant with an offset.
 */
const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

export const since = z
  .string()
  .trim()
  .transform((v, ctx): Since => {
    const duration = /^(\d{1,6})([smhd])$/.exec(v);
    if (duration !== null) return { seconds: Number(duration[1]) * UNIT_SECONDS[duration[2]!]! };
    if (datetime.safeParse(v).success) return { at: v };
    ctx.addIssue({ code: 'custom', message: 'a duration back from now (90s, 15m, 6h, 7d) or an ISO-8601 time with an offset' });
    return z.NEVER;
  });

export const PAGE_DEFAULT = 50;
export const PAGE_MAX = 1000;

/** A keyset page: how many rows, and where the previous page ended. */
export const page = { limit: count(PAGE_DEFAULT, PAGE_MAX), cursor: text.optional() };

/**
 * The names schedule-replay gives its one-time schedules; the ops role may create no
 * others (cdk/constructs/ops.ts reads it from here).
 */
export const REPLAY_SCHEDULE_PREFIX = 'ops-replay-';
