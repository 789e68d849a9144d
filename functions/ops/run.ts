/**
 * `{ command, ...args }` → validated arguments → the command's result. The one entry
 * point of both the ops Lambda and the CLI.
 */
import type { Context } from 'aws-lambda';
import type { z } from 'zod';
import type { Invocation, OpsCommand, OpsDeps, OpsLogger } from './command';
import { COMMAND_NAMES, COMMANDS, isCommandName, type CommandName } from './commands';
import { OpsError, OpsErrorCodes } from './errors';

/** Any command, its argument and result types erased: they were checked where it was defined. */
export function commandOf(name: CommandName): OpsCommand<z.ZodType, unknown> {
  return COMMANDS[name] as unknown as OpsCommand<z.ZodType, unknown>;
}

function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((i) => {
      const path = i.path.join('.');
      if (i.code === 'unrecognized_keys') return `unknown argument(s): ${i.keys.join(', ')}`;
      return `${path || '(arguments)'}: ${i.message}`;
    })
    .join('; ');
}

/** Validate `args` for `command`; throws OpsError UNKNOWN_COMMAND or BAD_ARGUMENTS. */
export function parseCommand(command: unknown, args: Record<string, unknown>): { command: CommandName; args: unknown } {
  if (!isCommandName(command)) {
    throw new OpsError(
      OpsErrorCodes.UNKNOWN_COMMAND,
      `unknown command ${JSON.stringify(command ?? null)} (commands: ${COMMAND_NAMES.join(', ')})`,
    );
  }
  const parsed = commandOf(command).schema.safeParse(args);
  if (!parsed.success) {
    throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, `${command}: ${describeIssues(parsed.error.issues)}`);
  }
  return { command, args: parsed.data };
}

export async function runCommand(deps: OpsDeps, input: unknown, inv: Invocation): Promise<unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'expected an object { command, ...args }');
  }
  const { command, ...rest } = input as Record<string, unknown>;
  const parsed = parseCommand(command, rest);
  return commandOf(parsed.command).run(deps, parsed.args, inv);
}

export type OpsResponse =
  | { ok: true; command: string; result: unknown }
  | { ok: false; error: { code: string; message: string; details?: Record<string, unknown> } };

interface HandlerLogger extends OpsLogger {
  warn(message: string, extra: Record<string, unknown>): void;
}

/** The handler's logic with its dependencies given: tests call it with a test database. */
export function createOpsHandler(resolveDeps: () => Promise<OpsDeps>, logger: HandlerLogger) {
  return async (event: unknown, context?: Pick<Context, 'awsRequestId' | 'invokedFunctionArn'>): Promise<OpsResponse> => {
    const e = (typeof event === 'object' && event !== null ? event : {}) as Record<string, unknown>;
    // Identifiers only: arguments may hold free text, and results may hold raw poison values.
    const trail = {
      command: typeof e.command === 'string' ? e.command : undefined,
      actor: typeof e.actor === 'string' ? e.actor : undefined,
      requestId: context?.awsRequestId,
    };
    try {
      const deps = await resolveDeps();
      const result = await runCommand({ ...deps, logger }, event, {
        source: 'lambda',
        // A qualified ARN (alias/version) would pin the schedule to it: target the function.
        invokedFunctionArn: context?.invokedFunctionArn?.split(':').slice(0, 7).join(':'),
        requestId: context?.awsRequestId,
      });
      logger.info('ops_command', { ...trail, ok: true });
      return { ok: true, command: String(e.command), result };
    } catch (error) {
      if (error instanceof OpsError) {
        logger.warn('ops_command', { ...trail, ok: false, errorCode: error.code });
        return { ok: false, error: error.toJSON() };
      }
      logger.error('ops_command', { ...trail, ok: false, error: error instanceof Error ? error.name : 'unknown' });
      throw error;
    }
  };
}
