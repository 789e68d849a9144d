/** `pause --consumer C [--worker] [--ingest]`: disable the consumer's worker schedule and/or its ingest mappings. */
import { defineCommand } from '../command';
import { formatPause, pauseSchema, switchConsumer } from '../pause-targets';

export const pause = defineCommand({
  usage: `pause --consumer C [--worker] [--ingest] [--reason TEXT]
      disable the consumer's worker schedule (the default), its ingest event-source mappings (--ingest), or both`,
  schema: pauseSchema,
  changes: 'always',
  run: (deps, args, inv) => switchConsumer(deps, args, inv, 'pause'),
  format: formatPause,
});
