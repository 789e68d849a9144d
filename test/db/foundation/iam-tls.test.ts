/**
 * A runtime function's connection with IAM authentication, against a real PostgreSQL
 * with TLS (its own embedded server, with a certificate from a CA made here): the client
 * verifies the server's certificate and name (verify-full), trusting the CA bundle given
 * by NODE_EXTRA_CA_CERTS as Lambda's Node.js runtime does with its Amazon bundle, and signs
 * one token for the connections it opens while that token is fresh.
 */
import { execFile } from 'node:child_process';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../../tools/embedded-postgres';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));
let dir: string;
let server: EmbeddedDatabase;

/** A CA, and a certificate it signs for the name `localhost` only. */
async function makeCertificates(into: string): Promise<void> {
  const ssl = (...args: string[]) => run('openssl', args, { cwd: into });
  await ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=inbox test CA',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
  );
  await ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr');
  // The subjectAltName is the name a verifying client checks.
  await writeFile(join(into, 'san.ext'), 'subjectAltName=DNS:localhost\n');
  await ssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    'san.ext',
    '-out',
    'server.crt',
  );
  // As root the server runs as `postgres`, which must own its key (PostgreSQL refuses a key others can read).
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(join(into, 'server.key'), Number(stdout.trim()), Number(gid.trim()));
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'inbox-tls-'));
  await run('chmod', ['755', dir]);
  await makeCertificates(dir);
  server = await startEmbeddedPostgres({
    settings: { ssl: 'on', ssl_cert_file: join(dir, 'server.crt'), ssl_key_file: join(dir, 'server.key') },
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
});

interface Outcome {
  ok: boolean;
  code?: string;
  tokens: number;
  rows?: { ssl: boolean; user: string }[];
}

/** The fixture as a function's own process: only its environment, as in Lambda. */
async function connect(host: string, env: Record<string, string> = {}): Promise<Outcome> {
  const url = new URL(server.url);
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'test/db/fixtures/iam-connect.ts'], {
    cwd: root,
    timeout: 60_000,
    env: {
      PATH: process.env.PATH ?? '',
      DB_IAM_USER: 'postgres',
      DB_HOST: host,
      DB_PORT: url.port,
      DB_NAME: 'postgres',
      AWS_REGION: 'eu-west-1',
      DB_CONNECT_TIMEOUT_SECONDS: '5',
      TEST_TOKEN: decodeURIComponent(url.password),
      ...env,
    },
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Outcome;
}

describe('IAM authentication over TLS', () => {
  it('connects over verified TLS, both connections with the one token it signed, when the CA is trusted', async () => {
    const outcome = await connect('localhost', { NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') });

    expect(outcome).toEqual({
      ok: true,
      tokens: 1,
      rows: [
        { ssl: true, user: 'postgres' },
        { ssl: true, user: 'postgres' },
      ],
    });
  });

  it('refuses a server whose certificate it cannot verify, before sending any token', async () => {
    const outcome = await connect('localhost');

    expect(outcome).toEqual({ ok: false, code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', tokens: 0 });
  });

  it('refuses a certificate issued for another name', async () => {
    const outcome = await connect('127.0.0.1', { NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') });

    expect(outcome).toMatchObject({ ok: false, code: 'ERR_TLS_CERT_ALTNAME_INVALID', tokens: 0 });
  });
});
