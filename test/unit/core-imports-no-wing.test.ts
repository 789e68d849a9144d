import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The lint rule of eslint.config.js that keeps the core apart from its wings: a core file that
// imports a wing fails `npm run lint`; a function's handler.ts, where the wings are plugged
// in, may. Linted with the repository's own configuration, that rule alone, and without the
// type information the other rules need (it only slows the parse).
const ROOT = join(import.meta.dirname, '..', '..');
const WINGS = readdirSync(join(ROOT, 'functions', 'wings'));

const eslint = new ESLint({
  cwd: ROOT,
  ruleFilter: ({ ruleId }) => ruleId === 'no-restricted-imports',
  overrideConfig: { languageOptions: { parserOptions: { projectService: false } } },
});

/** The no-restricted-imports messages for `source` linted as the file `path`. */
async function restrictions(path: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(source, { filePath: join(ROOT, path) });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

const importing = (specifier: string) => `import * as wing from '${specifier}';\nexport const used = wing;\n`;

describe('the core imports no wing', () => {
  it('knows the wings', () => {
    expect(WINGS).toContain('wake-ups');
  });

  it.each(WINGS)('refuses a core file that imports the %s wing', async (wing) => {
    const messages = await restrictions('functions/ingest/store-batch.ts', importing(`../wings/${wing}/any-module`));
    expect(messages).toEqual([
      expect.stringContaining(`The core imports no wing: functions/ingest is core and functions/wings/${wing} a wing`),
    ]);
  });

  it('refuses one lower down the core too', async () => {
    const messages = await restrictions('functions/inbox/claim-due.ts', importing('../wings/wake-ups/worker-slot'));
    expect(messages).toEqual([expect.stringContaining('The core imports no wing: functions/inbox is core')]);
  });

  it("lets a function's handler plug a wing in", async () => {
    expect(await restrictions('functions/worker/handler.ts', importing('../wings/wake-ups/invocation'))).toEqual([]);
    // …and keeps the rest of its folder's rule.
    expect(await restrictions('functions/worker/handler.ts', importing('../ops/run'))).toEqual([
      expect.stringContaining('functions/worker (function cores and handlers) sits below functions/ops'),
    ]);
  });
});
