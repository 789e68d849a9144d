/**
 * IAM database authentication (the runtime functions in AWS): the configuration that
 * selects it, the client it builds (a token per new connection, TLS verified), and the
 * token the AWS signer makes. No database is involved: the client connects lazily, and the
 * token is signed locally (SigV4 presigning), without an API call.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, parseConfig } from '../../functions/lib/config';
import { createSql, signTokensWithAws, type TokenTarget } from '../../functions/lib/db';

const IAM = {
  DB_IAM_USER: 'inbox_worker',
  DB_HOST: 'inbox.cluster-abc123.eu-west-1.rds.amazonaws.com',
  DB_PORT: '5432',
  DB_NAME: 'inbox',
  AWS_REGION: 'eu-west-1',
};

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('IAM database authentication: configuration', () => {
  it('reads the role, endpoint, database and region', () => {
    const { database } = parseConfig(IAM);
    expect(database).toMatchObject({
      iam: { user: 'inbox_worker', region: 'eu-west-1' },
      hostOverride: IAM.DB_HOST,
      port: 5432,
      name: 'inbox',
    });
    expect(database.secretArn).toBeUndefined();
  });

  it('needs the endpoint, database and region, and names each missing one', () => {
    const message = errorOf(() => parseConfig({ DB_IAM_USER: 'inbox_worker' })).message;
    for (const name of ['DB_HOST', 'DB_NAME', 'AWS_REGION']) expect(message).toContain(`${name}: required with DB_IAM_USER`);
  });

  it('refuses TLS that does not verify the server: the token is a credential', () => {
    expect(errorOf(() => parseConfig({ ...IAM, DB_SSL: 'require' })).message).toContain(
      'DB_SSL: must be verify-full with DB_IAM_USER',
    );
  });

  it('refuses a second way to connect beside it', () => {
    expect(errorOf(() => parseConfig({ ...IAM, DB_SECRET_ARN: 'arn:aws:secretsmanager:eu-west-1:1:secret:x' })).message).toContain(
      'set one of DATABASE_URL, DB_SECRET_ARN and DB_IAM_USER, not DB_SECRET_ARN and DB_IAM_USER',
    );
  });
});

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
      expect(options.ssl.checkServerIdentity('ignored', { subject: { CN: IAM.DB_HOST }, subjectaltname: `DNS:${IAM.DB_HOST}` })).toBeUndefined();
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
