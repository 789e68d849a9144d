/**
 * `npm start [-- options]`: the whole system on this machine (tools/local/run.ts).
 *
 * The one environment variable read here is DATABASE_URL, as `npm run migrate` does: set,
 * the run uses that (empty, migrated or not) database; unset, it starts an embedded one.
 *
 * Exit status: tools/local/exit-codes.ts. Ctrl-C (or SIGTERM) stops the run where it is:
 * the summary of what ran so far is printed, the report written, the embedded database
 * stopped and its folder removed, and the exit status is 130 (143). A second Ctrl-C ends
 * the process at once; the embedded database is still stopped and removed on exit.
 */
import { EmbeddedPostgresError } from '../tools/embedded-postgres';
import {
  DatabaseNotEmptyError,
  ExitCode,
  HELP,
  OptionsError,
  OwnEventsError,
  parseLocalArgs,
  runLocal,
  signalExitCode,
} from '../tools/local';

function usage(message: string): never {
  console.error(message);
  process.exit(ExitCode.usage);
}

let parsed;
try {
  parsed = parseLocalArgs(process.argv.slice(2));
} catch (error) {
  if (error instanceof OptionsError) usage(error.message);
  throw error;
}
if (parsed.help) {
  console.log(HELP);
  process.exit(ExitCode.passed);
}

/**
 * One Ctrl-C reaches this process twice under `npm start`: from the terminal (the whole
 * foreground process group gets it) and forwarded by npm. Repeats within this window are
 * that same press; a later one quits at once.
 *
 * (This script runs as `node --import tsx`, one process: the tsx CLI would run it in a child,
 * relay the signal a third time, and SIGKILL it when it does not acknowledge a signal within
 * 60 ms — on a busy machine, in the middle of its summary.)
 */
const REPEAT_WINDOW_MS = 2_000;

const controller = new AbortController();
let interruptedBy: NodeJS.Signals | undefined;
let interruptedAt = 0;
/** After a --keep run, a signal only ends the wait for it. */
let keeping = false;
function onSignal(signal: NodeJS.Signals): void {
  if (interruptedBy !== undefined) {
    if (Date.now() - interruptedAt < REPEAT_WINDOW_MS) return;
    process.exit(signalExitCode(interruptedBy));
  }
  interruptedBy = signal;
  interruptedAt = Date.now();
  const what = signal === 'SIGINT' ? 'Ctrl-C' : signal;
  process.stderr.write(
    keeping ? '\nStopping the embedded database…\n' : `\n${what}: stopping; what ran so far follows (${what} again to quit at once).\n`,
  );
  controller.abort();
}
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

const databaseUrl = process.env.DATABASE_URL?.trim() || undefined;
try {
  const result = await runLocal(parsed.options, {
    ...(databaseUrl !== undefined ? { databaseUrl } : {}),
    tty: process.stdout.isTTY === true,
    signal: controller.signal,
  });
  if (result.kept !== undefined) {
    const { url, opsUrl, embedded, stop } = result.kept;
    console.log(
      [
        '',
        embedded ? 'The embedded database is still running. In another terminal:' : "The database keeps the run's rows. Inspect it with:",
        // The CLI as the ops function's role, psql as the owner.
        `  DATABASE_URL='${opsUrl}' npm run ops -- stats`,
        `  psql '${url}' -c "select consumer_name, status, error_code, count(*) from integration.consumer_inbox group by 1, 2, 3 order by 1, 2"`,
        ...(embedded ? ['Press Ctrl-C to stop it (its data is deleted).'] : []),
      ].join('\n'),
    );
    if (embedded) {
      // Here Ctrl-C is the expected way to end: the run's own outcome is the exit status.
      keeping = true;
      if (!controller.signal.aborted) {
        await new Promise<void>((resolve) => controller.signal.addEventListener('abort', () => resolve(), { once: true }));
      }
      await stop();
    }
    process.exitCode = result.exitCode;
  } else {
    process.exitCode = result.interrupted && interruptedBy !== undefined ? signalExitCode(interruptedBy) : result.exitCode;
  }
} catch (error) {
  if (error instanceof DatabaseNotEmptyError || error instanceof OwnEventsError) usage(`npm start: ${error.message}`);
  console.error(error instanceof EmbeddedPostgresError ? `npm start: ${error.message}` : error);
  process.exitCode = ExitCode.failed;
}
