/**
 * The shapes an environment variable's text is parsed into (config.ts): each trims, and a
 * value that does not parse is an issue naming the variable, never a silent default.
 */
import { z } from 'zod';

export const integer = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

export const boolean = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.enum(['true', 'false', '1', '0', 'yes', 'no']))
  .transform((v) => v === 'true' || v === '1' || v === 'yes')
  .meta({ accepts: 'true or false (also 1/0, yes/no)' });

export const postgresUrl = z
  .string()
  .trim()
  .refine((v) => /^postgres(ql)?:\/\//.test(v) && URL.canParse(v), 'must be a postgres:// URL')
  .meta({ accepts: 'postgres:// URL' });

/** The levels Powertools Logger accepts, in any case. */
export const logLevel = z
  .string()
  .trim()
  .toUpperCase()
  .pipe(z.enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'CRITICAL', 'SILENT']))
  .meta({ accepts: 'TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL, SILENT (any case)' });
