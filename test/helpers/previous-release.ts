/**
 * The release before this one, as the upgrade test runs it: its tree at the commit that
 * releases/previous.json records (docs/migrations.md, "Proving it"), extracted with `git
 * archive` into .tmp/, with its own dependencies: this checkout's node_modules when its
 * lockfile is the same, else its own `npm ci` of its runtime dependencies (its patches
 * applied, as its postinstall would). Extracted once per commit and kept for later runs.
 */
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface PreviousRelease {
  /** The release's name, as recorded. */
  name: string;
  commit: string;
  /** Where its tree is, ready to bundle. */
  root: string;
}

interface Recorded {
  name: string;
  commit: string;
}

export function recordedPreviousRelease(): Recorded {
  const recorded = JSON.parse(readFileSync(join(ROOT, 'releases', 'previous.json'), 'utf8')) as Partial<Recorded>;
  if (typeof recorded.name !== 'string' || typeof recorded.commit !== 'string' || !/^[0-9a-f]{40}$/.test(recorded.commit)) {
    throw new Error('releases/previous.json must hold { "name": "<release>", "commit": "<40 hex digits>" }');
  }
  return { name: recorded.name, commit: recorded.commit };
}

async function sh(script: string, cwd: string): Promise<void> {
  await run('sh', ['-c', script], { cwd, maxBuffer: 64 * 1024 * 1024 });
}

function sameLockfile(dir: string): boolean {
  return readFileSync(join(dir, 'package-lock.json'), 'utf8') === readFileSync(join(ROOT, 'package-lock.json'), 'utf8');
}

/** Its dependencies: ours when the lockfiles agree, else its own runtime ones, patched. */
async function installDependencies(dir: string): Promise<void> {
  if (sameLockfile(dir)) {
    await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    return;
  }
  await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: dir, maxBuffer: 64 * 1024 * 1024 });
  if (!existsSync(join(dir, 'patches'))) return;
  for (const patch of (await readdir(join(dir, 'patches'))).filter((f) => f.endsWith('.patch')).sort()) {
    await sh(`patch -p1 --forward --silent < "patches/${patch}"`, dir);
  }
}

export async function checkOutPreviousRelease(): Promise<PreviousRelease> {
  const { name, commit } = recordedPreviousRelease();
  const dir = join(ROOT, '.tmp', `release-${commit.slice(0, 12)}`);
  const ready = join(dir, '.ready');
  // Ready, unless it borrowed this checkout's node_modules and this checkout's lockfile has changed since.
  if (existsSync(ready) && (!lstatSync(join(dir, 'node_modules')).isSymbolicLink() || sameLockfile(dir))) {
    return { name, commit, root: dir };
  }
  try {
    await run('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: ROOT });
  } catch {
    throw new Error(`the previous release's commit ${commit} (${name}) is not in this clone: fetch the history (git fetch --unshallow)`);
  }
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await sh(`git -C "${ROOT}" archive --format=tar ${commit} | tar -x -C "${dir}"`, ROOT);
  await installDependencies(dir);
  await writeFile(ready, `${name} ${commit}\n`);
  return { name, commit, root: dir };
}
