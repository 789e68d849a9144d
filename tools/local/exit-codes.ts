/**
 * What `npm start` exits with. Scripts and CI read these, so each means one thing:
 *
 *   0    the run settled and every check passed
 *   1    a check failed, or the run did not settle before --timeout (a check says so), or
 *        the embedded PostgreSQL could not start (the message says what to do)
 *   2    bad options (the message names the flag), or DATABASE_URL's database is not empty
 *   130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM: 128 + the signal's number, as shells report it
 */
import { constants } from 'node:os';

export const ExitCode = {
  passed: 0,
  failed: 1,
  usage: 2,
} as const;

export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + constants.signals[signal];
}
