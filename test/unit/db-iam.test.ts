/**
 * IAM database authentication (the runtime functions in AWS): the client it builds (one
 * token, reused until shortly before it expires; TLS verified) and the token the AWS signer makes. No database is
 * involved: the client connects lazily, and the token is signed locally (SigV4 presigning),
 * without an API call. Its configuration: config.test.ts; a real TLS server: iam-tls.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../functions/lib/config';
import {
  connectionsOf,
  createSql,
  reuseToken,
  signTokensWithAws,
  TOKEN_LIFETIME_MS,
  TOKEN_REFRESH_BEFORE_MS,
  type TokenTarget,
} from '../../functions/lib/db';
import { IAM } from './iam-env';

describe('IAM database authentication: the client', () => {
  it('connects as the role, verifying the certificate and name, with one token for the connections it opens while it is fresh', async () => {
    const targets: TokenTarget[] = [];
    let signed = 0;
    const sql = await createSql(parseConfig(IAM).database, {
      signer: async (target) => {
        targets.push(target);
        return async () => `token-${++signed}`;
      },
    });
    try {
      const options = sql.options as unknown as {
        host: string[];
        port: number[];
        database: string;
        user: string;
        pass: () => Promise<string>;
      };
      // TLS is the client's connections' own (db-connections.ts), to the configured host.
      const { tls, host } = connectionsOf(sql)!.options;
      const ssl = tls as { rejectUnauthorized: boolean; checkServerIdentity: (name: string, cert: unknown) => Error | undefined };
      expect(targets).toEqual([{ hostname: IAM.DB_HOST, port: 5432, username: 'inbox_worker', region: 'eu-west-1' }]);
      expect(options).toMatchObject({ host: [IAM.DB_HOST], port: [5432], database: 'inbox', user: 'inbox_worker' });
      expect(host).toBe(IAM.DB_HOST);
      // Verified: against the trusted CAs, and the certificate's names against the configured host.
      expect(ssl.rejectUnauthorized).toBe(true);
      const elsewhere = { subject: { CN: 'elsewhere.example.com' }, subjectaltname: 'DNS:elsewhere.example.com' };
      expect(ssl.checkServerIdentity('ignored', elsewhere)).toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
      expect(ssl.checkServerIdentity('ignored', { subject: { CN: IAM.DB_HOST }, subjectaltname: `DNS:${IAM.DB_HOST}` })).toBeUndefined();
      // postgres.js calls the password function each time it opens a connection: the same token.
      expect(typeof options.pass).toBe('function');
      expect([await options.pass(), await options.pass()]).toEqual(['token-1', 'token-1']);
    } finally {
      await sql.end();
    }
  });
});

describe('IAM database authentication: one token per container', () => {
  /** A signer that counts its tokens, and a clock the test moves. */
  function signing() {
    let signed = 0;
    let now = 1_000_000;
    const sign = vi.fn(async () => `token-${++signed}`);
    return { sign, source: reuseToken(sign, () => now), advance: (ms: number) => (now += ms) };
  }

  it('reuses the token for every connection until shortly before it expires, then signs one more', async () => {
    const { sign, source, advance } = signing();

    const early = [await source(), await source()];
    advance(TOKEN_LIFETIME_MS - TOKEN_REFRESH_BEFORE_MS - 1);
    const late = await source();
    advance(1);
    const renewed = [await source(), await source()];

    expect(early).toEqual(['token-1', 'token-1']);
    expect(late).toBe('token-1');
    expect(renewed).toEqual(['token-2', 'token-2']);
    expect(sign).toHaveBeenCalledTimes(2);
  });

  it('signs once for connections that open at the same moment (a fan-out, a deploy)', async () => {
    const { sign, source } = signing();

    const tokens = await Promise.all(Array.from({ length: 20 }, () => source()));

    expect(new Set(tokens)).toEqual(new Set(['token-1']));
    expect(sign).toHaveBeenCalledTimes(1);
  });

  it('keeps no token it failed to sign: the next connection signs again', async () => {
    const sign = vi.fn<() => Promise<string>>().mockRejectedValueOnce(new Error('no credentials yet')).mockResolvedValue('token-ok');
    const source = reuseToken(sign, () => 0);

    await expect(source()).rejects.toThrow('no credentials yet');
    expect(await source()).toBe('token-ok');
    expect(await source()).toBe('token-ok');
    expect(sign).toHaveBeenCalledTimes(2);
  });
});

describe('IAM database authentication: the AWS signer', () => {
  afterEach(() => vi.unstubAllEnvs());

  it('signs a connect token for the endpoint and role with the function role credentials', async () => {
    // The credentials the Lambda runtime gives the function's role, as the SDK finds them.
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIDEXAMPLE');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY');
    vi.stubEnv('AWS_SESSION_TOKEN', 'session-token');

    const token = await (await signTokensWithAws({ hostname: IAM.DB_HOST, port: 5432, username: 'inbox_worker', region: 'eu-west-1' }))();

    const url = new URL(`https://${token}`);
    expect(url.host).toBe(`${IAM.DB_HOST}:5432`);
    expect(url.searchParams.get('Action')).toBe('connect');
    expect(url.searchParams.get('DBUser')).toBe('inbox_worker');
    expect(url.searchParams.get('X-Amz-Credential')).toMatch(/^AKIDEXAMPLE\/\d{8}\/eu-west-1\/rds-db\/aws4_request$/);
    expect(url.searchParams.get('X-Amz-Expires')).toBe('900');
  });
});
