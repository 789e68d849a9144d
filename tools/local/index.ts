/** The local run (`npm start`): see run.ts for what it does and options.ts for its options. */
export { runLocal, DatabaseNotEmptyError, type LocalRunResult, type RunLocalIO } from './run';
export { DEFAULT_OPTIONS, HELP, OptionsError, parseLocalArgs, type LocalOptions } from './options';
export { ExitCode, signalExitCode } from './exit-codes';
export { OwnEventsError } from './own-events';
