/** `resume --consumer C`: enable the consumer's worker schedule again. */
import { defineCommand } from '../command';
import { formatPause, pauseSchema, setWorkerState } from '../pause-targets';

export const resume = defineCommand({
  usage: `resume --consumer C [--reason TEXT]     enable it again`,
  schema: pauseSchema,
  run: (deps, args, inv) => setWorkerState(deps, args, inv, 'ENABLED'),
  format: formatPause,
});
