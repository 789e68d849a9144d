import type { LambdaFunctionURLResult } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../../functions/lib/db';
import { parseArgv } from '../../../functions/ops/cli';
import type { OpsDeps } from '../../../functions/ops/command';
import { OpsError } from '../../../functions/ops/errors';
import { createOpsHandler, type OpsResponse } from '../../../functions/ops/run';
import { functionUrlRequest, OPERATOR_ROLE, OPERATOR_SESSION } from '../../../tools/function-url-events';

describe('CLI arguments', () => {
  it('joins two-word commands, camel-cases flags, collects ids and takes a positional poison id', () => {
    expect(parseArgv(['replay', '--id', 'a', '--ids=b,c', '--dry-run', '--limit', '5'])).toEqual({
      command: 'replay',
      args: { ids: ['a', 'b', 'c'], dryRun: true, limit: '5' },
      json: false,
      help: false,
    });
    expect(parseArgv(['poison', 'show', 'p-1', '--json'])).toEqual({
      command: 'poison-show',
      args: { id: 'p-1' },
      json: true,
      help: false,
    });
    expect(parseArgv(['quarantine', 'list', '--error-code', 'X']).args).toEqual({ errorCode: 'X' });
    expect(parseArgv(['quarantine']).command).toBe('quarantine');
    expect(parseArgv(['help']).help).toBe(true);
  });

  it('refuses a flag without its value, a repeated flag and stray words', () => {
    for (const argv of [
      ['replay', '--reason'],
      ['replay', '--reason', '--dry-run'],
      ['stats', '--consumer', 'a', '--consumer', 'b'],
      ['stats', 'extra'],
    ]) {
      const error = (() => {
        try {
          parseArgv(argv);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(OpsError);
      expect((error as OpsError).code).toBe('BAD_ARGUMENTS');
    }
  });
});

describe('ops Lambda', () => {
  const logged: string[] = [];
  const logger = {
    info: (m: string) => logged.push(`info ${m}`),
    warn: (m: string) => logged.push(`warn ${m}`),
    error: (m: string) => logged.push(`error ${m}`),
  };
  // These events fail validation before any query is issued.
  const unused = { send: (() => Promise.reject(new Error('unused'))) as never };
  const deps: OpsDeps = {
    sql: {} as Sql,
    scheduler: unused,
    lambda: unused,
    consumers: [],
    config: { scheduler: {}, maxPayloadBytes: 1 },
  };
  const handler = createOpsHandler(async () => deps, logger, { operatorPrincipals: [OPERATOR_ROLE] });
  /** The ops response a function URL request got, with its HTTP status. */
  const viaUrl = async (body: unknown, caller: string | null = OPERATOR_SESSION, method?: string) => {
    const response = (await handler(functionUrlRequest(body, caller, method === undefined ? {} : { method }))) as LambdaFunctionURLResult;
    if (typeof response === 'string') throw new Error('expected a structured function URL response');
    return { status: response.statusCode, ...(JSON.parse(response.body!) as OpsResponse) };
  };

  it('answers a caller mistake on its function URL with 400, ok: false and a code', async () => {
    logged.length = 0;
    expect(await viaUrl({ command: 'explode' })).toEqual({
      status: 400,
      ok: false,
      error: { code: 'UNKNOWN_COMMAND', message: expect.stringContaining('explode') },
    });
    expect(await viaUrl({ command: 'replay', consumer: 'case-projection', limit: 'many' })).toMatchObject({
      status: 400,
      error: { code: 'BAD_ARGUMENTS', message: expect.stringContaining('limit') },
    });
    expect(await viaUrl('stats')).toMatchObject({ status: 400, error: { code: 'BAD_ARGUMENTS' } });
    expect(await viaUrl({ command: 'stats' }, OPERATOR_SESSION, 'GET')).toMatchObject({ status: 400, error: { code: 'BAD_ARGUMENTS' } });
    expect(logged).toEqual(['warn ops_command', 'warn ops_command', 'warn ops_command', 'warn ops_command']);
  });

  it('takes the actor from the caller, never from the request', async () => {
    expect(await viaUrl({ command: 'replay', consumer: 'case-projection', reason: 'x', actor: 'someone-else', apply: true })).toMatchObject(
      {
        status: 400,
        error: { code: 'BAD_ARGUMENTS', message: expect.stringContaining("the actor is the caller's IAM identity") },
      },
    );
  });

  it('refuses, with 403, a signed caller that is not one of the stage operators', async () => {
    for (const caller of [
      'arn:aws:sts::123456789012:assumed-role/SomeOtherRole/alice@example.com',
      'arn:aws:sts::210987654321:assumed-role/InboxOperatorAlice/alice@example.com',
      'arn:aws:iam::123456789012:user/mallory',
      null,
    ]) {
      expect(await viaUrl({ command: 'stats' }, caller)).toMatchObject({ status: 403, ok: false, error: { code: 'NOT_AN_OPERATOR' } });
    }
  });

  it('needs an explicit apply for a command without a dry run, and refuses dryRun in the request', async () => {
    expect(await viaUrl({ command: 'pause', consumer: 'case-projection', reason: 'x' })).toMatchObject({
      status: 400,
      error: { code: 'APPLY_REQUIRED' },
    });
    expect(await viaUrl({ command: 'replay', consumer: 'case-projection', dryRun: false })).toMatchObject({
      status: 400,
      error: { code: 'BAD_ARGUMENTS', message: expect.stringContaining('"apply": true') },
    });
  });

  it('runs nothing invoked directly but what the replay schedules send', async () => {
    for (const event of [{ command: 'stats' }, { command: 'replay', consumer: 'case-projection', reason: 'x', actor: 'forged' }, 'stats']) {
      expect(await handler(event)).toMatchObject({ ok: false, error: { code: 'FUNCTION_URL_REQUIRED' } });
    }
    // What a schedule sends is validated as any command (and would run the replay the database holds).
    expect(await handler({ command: 'run-scheduled-replay', replayId: 'not-a-uuid' })).toMatchObject({
      ok: false,
      error: { code: 'BAD_ARGUMENTS' },
    });
  });

  it('throws platform failures, so that they count as function errors', async () => {
    const failing = createOpsHandler(
      async () => {
        throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
      },
      logger,
      { operatorPrincipals: [OPERATOR_ROLE] },
    );
    const error = await failing(functionUrlRequest({ command: 'stats' }, OPERATOR_SESSION)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code).toBe('ECONNREFUSED');
  });
});
