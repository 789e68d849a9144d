/** `pause --consumer C`: disable the consumer's worker schedule. */
import { defineCommand } from '../command';
import { formatPause, pauseSchema, setWorkerState } from '../pause-targets';

export const pause = defineCommand({
  usage: `pause --consumer C [--reason TEXT]      disable the consumer's worker schedule`,
  schema: pauseSchema,
  run: (deps, args, inv) => setWorkerState(deps, args, inv, 'DISABLED'),
  format: formatPause,
});
