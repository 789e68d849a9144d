/**
 * The ops function's front door: its Lambda function URL, with AWS_IAM auth
 * (docs/ops.md, "Who did it"). Lambda checks the caller's SigV4 signature and the function's
 * resource policy, which names the stage's operators (cdk/constructs/ops.ts), and puts the
 * caller's IAM identity in the request context: that identity is the actor, never a field
 * of the request. A direct Invoke carries no caller identity, so it may only run what the
 * one-time replay schedules send (run-scheduled-replay: a replay the database holds, at most
 * once).
 *
 * A request is `POST` with a JSON body `{ "command": …, …arguments, "apply"?: true }`. A
 * command that changes state runs as a dry run unless the body says `"apply": true`; one
 * that has no dry run is refused without it.
 */
import type { LambdaFunctionURLEventWithIAMAuthorizer, LambdaFunctionURLResult } from 'aws-lambda';
import { COMMANDS, isCommandName, type CommandName } from './commands';
import { OpsError, OpsErrorCodes } from './errors';

/** What the one-time replay schedules invoke directly (functions/ops/commands/schedule-replay.ts). */
export const DIRECT_COMMANDS: readonly CommandName[] = ['run-scheduled-replay'];

/** Whether `event` came through a function URL (it has an HTTP request context), or is a direct Invoke. */
export function isFunctionUrlEvent(event: unknown): event is LambdaFunctionURLEventWithIAMAuthorizer {
  const e = event as Partial<LambdaFunctionURLEventWithIAMAuthorizer> | null;
  return typeof e === 'object' && e !== null && typeof e.requestContext === 'object' && typeof e.requestContext?.http === 'object';
}

/**
 * Whether the signed caller is one of the declared operator principals: an IAM user by its
 * ARN, an IAM role by the sessions assumed from it (`arn:…:sts::<account>:assumed-role/<name>/…`,
 * which carries the role's name but not its path). No operators declared: nobody.
 */
export function isOperator(callerArn: string, operatorArns: readonly string[]): boolean {
  return operatorArns.some((declared) => {
    const role = /^arn:([\w-]+):iam::(\d{12}):role\/(?:[\w+=,.@/-]*\/)?([\w+=,.@-]+)$/.exec(declared);
    if (role === null) return callerArn === declared;
    const [, partition, account, name] = role;
    return callerArn.startsWith(`arn:${partition}:sts::${account}:assumed-role/${name}/`);
  });
}

/** A request of the function URL as the command's input, its dry-run default applied. Throws OpsError. */
export function urlRequestInput(event: LambdaFunctionURLEventWithIAMAuthorizer): Record<string, unknown> {
  if (event.requestContext.http.method !== 'POST') {
    throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'POST a JSON body { "command": …, …arguments }');
  }
  const text = event.isBase64Encoded ? Buffer.from(event.body ?? '', 'base64').toString('utf8') : (event.body ?? '');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'the body is not JSON: POST { "command": …, …arguments }');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'expected an object { command, ...args }');
  }
  const { apply, ...input } = body as Record<string, unknown>;
  if ('actor' in input) {
    throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, "actor: not an argument here; the actor is the caller's IAM identity");
  }
  if (apply !== undefined && typeof apply !== 'boolean') throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'apply: expected true or false');
  if (!isCommandName(input.command)) return input; // refused with the list of commands by runCommand
  const changes = COMMANDS[input.command].changes;
  if (changes === 'dry-run-flag') {
    if ('dryRun' in input)
      throw new OpsError(OpsErrorCodes.BAD_ARGUMENTS, 'dryRun: a dry run is the default here; send "apply": true to act');
    return { ...input, dryRun: apply !== true };
  }
  if (changes === 'apply-flag') return { ...input, apply: apply === true };
  if (changes === 'always' && apply !== true) {
    throw new OpsError(OpsErrorCodes.APPLY_REQUIRED, `${input.command} changes state and has no dry run: send "apply": true to run it`);
  }
  return input;
}

/** The HTTP response of a function URL request: the ops response as JSON, with a status that says who was wrong. */
export function urlResponse(statusCode: number, body: unknown): LambdaFunctionURLResult {
  return { statusCode, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}
