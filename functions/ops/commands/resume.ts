/** `resume --consumer C [--worker] [--ingest]`: enable what pause disabled. */
import { defineCommand } from '../command';
import { formatPause, pauseSchema, switchConsumer } from '../pause-targets';

export const resume = defineCommand({
  usage: `resume --consumer C [--worker] [--ingest] [--reason TEXT]
      enable them again, the same way`,
  schema: pauseSchema,
  changes: 'always',
  run: (deps, args, inv) => switchConsumer(deps, args, inv, 'resume'),
  format: formatPause,
});
