import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { configurationReference, environmentRows, stageRows, undocumented } from '../../tools/config-reference';
import { integer } from '../../functions/lib/env-values';

describe('docs/configuration.md', () => {
  it('is what `npm run docs:config` generates from the schemas (run it after changing one)', () => {
    const checkedIn = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    expect(checkedIn).toBe(configurationReference());
  });

  it('describes every environment variable and every stage key', () => {
    expect(undocumented()).toEqual([]);
  });

  it('reports a variable or a stage key without a description, by name or path', () => {
    expect(environmentRows({ DOCUMENTED: integer(1, 9).default(3).describe('said'), SILENT: z.string().optional() })).toEqual([
      { key: 'DOCUMENTED', default: '`3`', accepts: 'whole number, 1–9', description: 'said' },
      { key: 'SILENT', accepts: 'text', description: undefined },
    ]);
    const stage = z.object({
      database: z.object({ size: z.number().int().min(1).max(4).default(2).describe('said'), quiet: z.boolean().optional() }).prefault({}),
      consumers: z.record(z.string(), z.object({ stack: z.string().optional() })),
    });
    expect(stageRows(stage).map((r) => [r.key, r.description])).toEqual([
      ['database.size', 'said'],
      ['database.quiet', undefined],
      ['consumers.<name>.stack', undefined],
    ]);
  });
});
