/**
 * The database secret is read into the client and never into an error message. A secret
 * that is not the expected JSON (a plaintext password, a truncated value) must not surface
 * JSON.parse's message, which quotes the text it could not parse: the credential would go
 * to the handler's log line and to the Lambda's error output.
 */
import { describe, expect, it } from 'vitest';
import { createSql } from '../../../functions/lib/db';
import { useTestDatabase } from '../../helpers/db';

const db = await useTestDatabase();

const SECRET_ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:inbox-db';
const config = {
  secretArn: SECRET_ARN,
  ssl: 'disable' as const,
  prepare: true,
  poolMax: 1,
  idleTimeoutSeconds: 5,
  connectTimeoutSeconds: 5,
  queryTimeoutMs: 0,
};

async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describe('createSql with a Secrets Manager secret', () => {
  it('connects with the secret of the cluster', async () => {
    const u = new URL(db.url);
    const secret = JSON.stringify({
      host: u.hostname,
      port: Number(u.port),
      username: decodeURIComponent(u.username),
      password: decodeURIComponent(u.password),
      dbname: u.pathname.slice(1),
    });
    const sql = await createSql(config, { readSecret: async () => secret });
    try {
      const [row] = await sql<{ db: string }[]>`select current_database() as db`;
      expect(row!.db).toBe(u.pathname.slice(1));
    } finally {
      await sql.end();
    }
  });

  it.each([
    ['a plaintext password', 'hunter2-plaintext-password'],
    ['truncated JSON', '{"username":"app","password":"hunter2-truncated'],
  ])('refuses %s without quoting it', async (_, secret) => {
    const error = await failureOf(createSql(config, { readSecret: async () => secret }));

    expect(error.name).toBe('ConfigError');
    expect(error.message).toContain(SECRET_ARN);
    expect(error.message).not.toContain('hunter2');
    expect(String((error as { cause?: unknown }).cause ?? '')).not.toContain('hunter2');
  });
});
