/**
 * `{ command, ...args }` → validated arguments → the command's result. The one entry
 * point of both the ops Lambda and the CLI.
 */
import type { Context, LambdaFunctionURLEventWithIAMAuthorizer, LambdaFunctionURLResult } from 'aws-lambda';
import type { z } from 'zod';
import type { Invocation, OpsCommand, OpsDeps, OpsLogger } from './command';
import { COMMAND_NAMES, COMMANDS, isCommandName, type CommandName } from './commands';
import { OpsError, OpsErrorCodes, USAGE_ERRORS } from './errors';
import { DIRECT_COMMANDS, isFunctionUrlEvent, isOperator, urlRequestInput, urlResponse } from './function-url';

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

export interface OpsHandlerOptions {
  /** The stage's operator principals (IAM role or user ARNs): the callers the function URL serves. */
  operatorPrincipals?: readonly string[];
}

type OpsContext = Pick<Context, 'awsRequestId' | 'invokedFunctionArn'>;

/**
 * The handler's logic with its dependencies given: tests call it with a test database. A
 * function URL request (./function-url.ts) is answered over HTTP, its caller's IAM identity
 * the actor; a direct Invoke only for what the replay schedules send.
 */
export function createOpsHandler(resolveDeps: () => Promise<OpsDeps>, logger: HandlerLogger, options: OpsHandlerOptions = {}) {
  const run = async (input: unknown, inv: Invocation, trail: Record<string, unknown>): Promise<OpsResponse> => {
    try {
      const deps = await resolveDeps();
      const result = await runCommand({ ...deps, logger }, input, inv);
      logger.info('ops_command', { ...trail, ok: true });
      return { ok: true, command: String(trail.command), result };
    } catch (error) {
      if (error instanceof OpsError) {
        logger.warn('ops_command', { ...trail, ok: false, errorCode: error.code });
        return { ok: false, error: error.toJSON() };
      }
      logger.error('ops_command', { ...trail, ok: false, error: error instanceof Error ? error.name : 'unknown' });
      throw error;
    }
  };
  const invocation = (context: OpsContext | undefined, actor?: string): Invocation => ({
    source: 'lambda',
    ...(actor === undefined ? {} : { defaultActor: actor }),
    // A qualified ARN (alias/version) would pin the schedule to it: target the function.
    invokedFunctionArn: context?.invokedFunctionArn?.split(':').slice(0, 7).join(':'),
    requestId: context?.awsRequestId,
  });
  const refuse = (error: OpsError, trail: Record<string, unknown>): OpsResponse => {
    logger.warn('ops_command', { ...trail, ok: false, errorCode: error.code });
    return { ok: false, error: error.toJSON() };
  };

  async function viaUrl(event: LambdaFunctionURLEventWithIAMAuthorizer, context: OpsContext | undefined): Promise<LambdaFunctionURLResult> {
    // Identifiers only: arguments may hold free text, and results may hold raw poison values.
    const caller = event.requestContext.authorizer?.iam?.userArn;
    const trail: Record<string, unknown> = { via: 'function-url', actor: caller, requestId: context?.awsRequestId };
    if (caller === undefined || !isOperator(caller, options.operatorPrincipals ?? [])) {
      const error = new OpsError(OpsErrorCodes.NOT_AN_OPERATOR, "the caller is not one of the stage's operators");
      return urlResponse(403, refuse(error, trail));
    }
    let input: Record<string, unknown>;
    try {
      input = urlRequestInput(event);
    } catch (error) {
      if (!(error instanceof OpsError)) throw error;
      return urlResponse(400, refuse(error, trail));
    }
    trail.command = typeof input.command === 'string' ? input.command : undefined;
    const response = await run(input, invocation(context, caller), trail);
    if (response.ok) return urlResponse(200, response);
    return urlResponse(USAGE_ERRORS.has(response.error.code) ? 400 : 422, response);
  }

  async function direct(event: unknown, context: OpsContext | undefined): Promise<OpsResponse> {
    const e = (typeof event === 'object' && event !== null ? event : {}) as Record<string, unknown>;
    const trail = { via: 'invoke', command: typeof e.command === 'string' ? e.command : undefined, requestId: context?.awsRequestId };
    if (!DIRECT_COMMANDS.includes(e.command as CommandName)) {
      const error = new OpsError(
        OpsErrorCodes.FUNCTION_URL_REQUIRED,
        "call the ops function through its function URL (AWS_IAM auth): the caller's IAM identity is the actor. A direct Invoke runs only what replay schedules send",
      );
      return refuse(error, trail);
    }
    return run(event, invocation(context), trail);
  }

  return async (event: unknown, context?: OpsContext): Promise<OpsResponse | LambdaFunctionURLResult> =>
    isFunctionUrlEvent(event) ? viaUrl(event, context) : direct(event, context);
}
