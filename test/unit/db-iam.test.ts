/**
 * IAM database authentication (the runtime functions in AWS): the client it builds (a token
 * per new connection, TLS verified) and the token the AWS signer makes. No database is
 * involved: the client connects lazily, and the token is signed locally (SigV4 presigning),
 * without an API call. Its configuration: config.test.ts; a real TLS server: iam-tls.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../functions/lib/config';
import { createSql, signTokensWithAws, type TokenTarget } from '../../functions/lib/db';
import { IAM } from './iam-env';

describe('IAM database authentication: the client', () => {
  it('connects as the role, verifying the certificate and name, with a fresh token for every connection', async () => {
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
        ssl: { rejectUnauthorized: boolean; checkServerIdentity: (name: string, cert: unknown) => Error | undefined };
        pass: () => Promise<string>;
      };
      expect(targets).toEqual([{ hostname: IAM.DB_HOST, port: 5432, username: 'inbox_worker', region: 'eu-west-1' }]);
      expect(options).toMatchObject({ host: [IAM.DB_HOST], port: [5432], database: 'inbox', user: 'inbox_worker' });
      // Verified: against the trusted CAs, and the certificate's names against the configured host.
      expect(options.ssl.rejectUnauthorized).toBe(true);
      const elsewhere = { subject: { CN: 'elsewhere.example.com' }, subjectaltname: 'DNS:elsewhere.example.com' };
      expect(options.ssl.checkServerIdentity('ignored', elsewhere)).toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
      expect(
        options.ssl.checkServerIdentity('ignored', { subject: { CN: IAM.DB_HOST }, subjectaltname: `DNS:${IAM.DB_HOST}` }),
      ).toBeUndefined();
      // postgres.js calls the password function each time it opens a connection.
      expect(typeof options.pass).toBe('function');
      expect([await options.pass(), await options.pass()]).toEqual(['token-1', 'token-2']);
    } finally {
      await sql.end();
    }
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
