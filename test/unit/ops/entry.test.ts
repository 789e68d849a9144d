import { describe, expect, it } from 'vitest';
import type { Sql } from '../../../functions/lib/db';
import { parseArgv } from '../../../functions/ops/cli';
import type { OpsDeps } from '../../../functions/ops/command';
import { OpsError } from '../../../functions/ops/errors';
import { createOpsHandler } from '../../../functions/ops/run';

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
    config: { scheduler: { workerSchedules: {} }, ingestMappings: {}, workerFunctions: {}, maxPayloadBytes: 1 },
  };
  const handler = createOpsHandler(async () => deps, logger);

  it('answers a caller mistake with ok: false and a code', async () => {
    expect(await handler({ command: 'explode' })).toEqual({
      ok: false,
      error: { code: 'UNKNOWN_COMMAND', message: expect.stringContaining('explode') },
    });
    expect(await handler({ command: 'replay', consumer: 'case-projection', dryRun: 'maybe' })).toMatchObject({
      ok: false,
      error: { code: 'BAD_ARGUMENTS', message: expect.stringContaining('dryRun') },
    });
    expect(await handler('stats')).toMatchObject({ ok: false, error: { code: 'BAD_ARGUMENTS' } });
    expect(logged).toEqual(['warn ops_command', 'warn ops_command', 'warn ops_command']);
  });

  it('throws platform failures, so that they count as function errors', async () => {
    const failing = createOpsHandler(async () => {
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    }, logger);
    const error = await failing({ command: 'stats' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((error as { code?: string }).code).toBe('ECONNREFUSED');
  });
});
