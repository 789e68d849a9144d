/**
 * Synth refuses an install without the fixes in patches/: every function of the app checks
 * node_modules at the project root before its bundle is defined. Here the check answers as
 * it does for an install that skipped postinstall (test/unit/dependency-patches.test.ts runs
 * it against such a copy of postgres).
 */
import { describe, expect, it, vi } from 'vitest';
import { PROJECT_ROOT } from '../../cdk/constructs/inbox-function';
import type * as patches from '../../cdk/constructs/dependency-patches';
import { UnpatchedDependencyError } from '../../cdk/constructs/dependency-patches';
import { synthesize } from './synth';

const checkedRoots = vi.hoisted(() => [] as string[]);
vi.mock('../../cdk/constructs/dependency-patches', async (importOriginal) => {
  const actual = await importOriginal<typeof patches>();
  return {
    ...actual,
    assertDependenciesPatched: (root: string) => {
      checkedRoots.push(root);
      throw new actual.UnpatchedDependencyError([
        'node_modules/postgres/src/connection.js lacks the change of patches/postgres+3.4.9.patch at its line 252',
      ]);
    },
  };
});

describe('synth with an unpatched postgres', () => {
  it('fails, naming what is missing and how to apply it, having checked the project root', () => {
    expect(() => synthesize({ bundle: false })).toThrow(UnpatchedDependencyError);
    expect(() => synthesize({ bundle: false })).toThrow(/src\/connection\.js lacks the change .*\n.*npx patch-package/s);
    expect(new Set(checkedRoots)).toEqual(new Set([PROJECT_ROOT]));
  });
});
