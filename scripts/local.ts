/**
 * `npm start [-- options]`: the whole system on this machine (tools/local/run.ts).
 *
 * The one environment variable read here is DATABASE_URL, as `npm run migrate` does: set,
 * the run uses that (empty, migrated or not) database; unset, it starts an embedded one.
 */
import { DatabaseNotEmptyError, HELP, OptionsError, parseLocalArgs, runLocal } from '../tools/local';

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

let parsed;
try {
  parsed = parseLocalArgs(process.argv.slice(2));
} catch (error) {
  if (error instanceof OptionsError) fail(error.message);
  throw error;
}
if (parsed.help) {
  console.log(HELP);
  process.exit(0);
}

const databaseUrl = process.env.DATABASE_URL?.trim() || undefined;
try {
  const result = await runLocal(parsed.options, {
    ...(databaseUrl !== undefined ? { databaseUrl } : {}),
    tty: process.stdout.isTTY === true,
  });
  if (result.kept !== undefined) {
    const { url, opsUrl, embedded, stop } = result.kept;
    console.log(
      [
        '',
        embedded ? 'The embedded database is still running. In another terminal:' : 'The database keeps the run\'s rows. Inspect it with:',
        // The CLI as the ops function's role, psql as the owner.
        `  DATABASE_URL='${opsUrl}' npm run ops -- stats`,
        `  psql '${url}' -c "select consumer_name, status, error_code, count(*) from integration.consumer_inbox group by 1, 2, 3 order by 1, 2"`,
        ...(embedded ? ['Press Ctrl-C to stop it (its data is deleted).'] : []),
      ].join('\n'),
    );
    if (embedded) {
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await stop();
    }
  }
  process.exitCode = result.exitCode;
} catch (error) {
  if (error instanceof DatabaseNotEmptyError) fail(`npm start: ${error.message}`);
  console.error(error);
  process.exitCode = 1;
}
