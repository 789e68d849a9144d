/**
 * Every ops command by name (the name the Lambda's `command` and the CLI take; the CLI's
 * `poison list` is `poison-list`). One file per command, its schema beside it.
 */
import { audit } from './audit';
import { event } from './event';
import { pause } from './pause';
import { poisonList } from './poison-list';
import { poisonReingest } from './poison-reingest';
import { poisonShow } from './poison-show';
import { quarantine } from './quarantine';
import { quarantineList } from './quarantine-list';
import { reingestFailed } from './reingest-failed';
import { replay } from './replay';
import { resolve } from './resolve';
import { resume } from './resume';
import { runScheduledReplayCommand } from './run-scheduled-replay';
import { scheduleReplay } from './schedule-replay';
import { stats } from './stats';

export const COMMANDS = {
  event,
  stats,
  quarantine,
  'quarantine-list': quarantineList,
  replay,
  'schedule-replay': scheduleReplay,
  'run-scheduled-replay': runScheduledReplayCommand,
  resolve,
  'poison-list': poisonList,
  'poison-show': poisonShow,
  'poison-reingest': poisonReingest,
  'reingest-failed': reingestFailed,
  pause,
  resume,
  audit,
};

export type CommandName = keyof typeof COMMANDS;

export const COMMAND_NAMES = Object.keys(COMMANDS) as CommandName[];

export function isCommandName(name: unknown): name is CommandName {
  return typeof name === 'string' && Object.hasOwn(COMMANDS, name);
}
