import { DEFAULT_OPTIONS, type LocalOptions } from '../../../tools/local/options';

/** A short local run with every kind of fault in it: the local-run tests' stream. */
export function smallRun(overrides: Partial<LocalOptions>): LocalOptions {
  return {
    ...DEFAULT_OPTIONS,
    events: 300,
    poisonRate: 0.03,
    invalidRate: 0.03,
    transientRate: 0.05,
    permanentRate: 0.03,
    infraFailureRate: 0.1,
    redeliveryRate: 0.1,
    crashes: 1,
    batchSize: 40,
    tickMs: 100,
    timeoutSeconds: 50,
    logLevel: 'SILENT',
    ...overrides,
  };
}
