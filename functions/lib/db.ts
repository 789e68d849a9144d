/**
 * The postgres.js client, built once per Lambda container from the configuration.
 *
 * Lambda freezes the process between invocations, so the client lives at module scope
 * with a small pool and an idle timeout: a frozen container holds few connections, and a
 * thawed one reconnects instead of writing to a socket the server closed long ago.
 */
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import postgres from 'postgres';
import { ConfigError } from './config';
import type { DatabaseConfig } from './config-database';

export type Sql = postgres.Sql<Record<string, unknown>>;
export type TransactionSql = postgres.TransactionSql<Record<string, unknown>>;
/** Anything a query can be issued on: the pool, a reserved connection or a transaction. */
export type Queryable = Sql | TransactionSql;

/** The fields of an RDS-generated database secret that the client needs. */
interface DatabaseSecret {
  host: string;
  port?: number;
  username: string;
  password: string;
  dbname?: string;
}

export type SecretReader = (secretArn: string) => Promise<string>;

/** What an IAM authentication token is signed for: the endpoint the client connects to, and the role. */
export interface TokenTarget {
  hostname: string;
  port: number;
  username: string;
  region: string;
}

/** Builds the token source of one client: called for every new connection. */
export type TokenSigner = (target: TokenTarget) => Promise<() => Promise<string>>;

export interface SqlDependencies {
  readSecret?: SecretReader;
  signer?: TokenSigner;
}

/** Reads a secret with the AWS SDK; loaded lazily so local runs never touch it. */
const readSecretFromAws: SecretReader = async (secretArn) => {
  const { SecretsManagerClient, GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
  const client = new SecretsManagerClient({});
  const out = await client.send(new GetSecretValueCommand({ SecretId: secretArn }));
  if (out.SecretString === undefined) throw new Error('database secret has no SecretString');
  return out.SecretString;
};

/**
 * IAM database authentication tokens, signed locally with the function role's credentials
 * (SigV4 presigning: no API call). One Signer per client; each call signs anew, since a
 * token is accepted for 15 minutes and a pool opens connections long after its first.
 */
export const signTokensWithAws: TokenSigner = async ({ hostname, port, username, region }) => {
  const { Signer } = await import('@aws-sdk/rds-signer');
  const signer = new Signer({ hostname, port, username, region });
  return () => signer.getAuthToken();
};

function isLocalHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.') || host.startsWith('/');
}

/**
 * TLS with the server's certificate checked against the trusted CAs and against `host`.
 * Not postgres.js's 'verify-full': it leaves the name to Node, which checks an IP address
 * host against "localhost" (test/db/foundation/iam-tls.test.ts).
 */
export function verifiedTls(host: string): postgres.Options<{}>['ssl'] {
  return { rejectUnauthorized: true, checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(host, cert) };
}

function sslOption(mode: DatabaseConfig['ssl'], host: string): postgres.Options<{}>['ssl'] {
  const effective = mode ?? (isLocalHost(host) ? 'disable' : 'require');
  if (effective === 'disable') return false;
  if (effective === 'verify-full') return verifiedTls(host);
  return 'require';
}

/**
 * bigint columns (offsets, aggregate versions, counts) come back as JS numbers: Kafka
 * offsets and versions stay far below 2^53, and numbers keep the handlers' code plain.
 */
export const TYPES = {
  bigint: {
    to: 20,
    from: [20],
    serialize: (x: number | bigint) => x.toString(),
    parse: (x: string) => Number(x),
  },
};

function baseOptions(config: DatabaseConfig): postgres.Options<{}> {
  return {
    max: config.poolMax,
    idle_timeout: config.idleTimeoutSeconds,
    connect_timeout: config.connectTimeoutSeconds,
    // Recycle connections so that a failover or a rotated secret is picked up (and, with
    // IAM authentication, so that no session outlives the token it was opened with by much).
    max_lifetime: 60 * 15,
    prepare: config.prepare,
    onnotice: () => {},
    connection: {
      application_name: 'kafka-inbox',
      ...(config.statementTimeoutMs > 0 ? { statement_timeout: config.statementTimeoutMs } : {}),
      ...(config.idleInTransactionTimeoutMs > 0 ? { idle_in_transaction_session_timeout: config.idleInTransactionTimeoutMs } : {}),
    },
    types: TYPES,
  };
}

/**
 * The secret's JSON. JSON.parse's own message quotes the text it could not parse, which
 * here is the credential: it is dropped (no cause either), the ARN says which secret.
 */
function parseSecret(secretArn: string, text: string): DatabaseSecret {
  try {
    return JSON.parse(text) as DatabaseSecret;
  } catch {
    throw new ConfigError(`database secret ${secretArn} is not a JSON object of host, port, username, password, dbname`);
  }
}

/**
 * Build a client from a configuration: a URL; IAM authentication as a database role (a
 * password function: postgres.js calls it for each new connection, so each gets a fresh
 * token; TLS with the server's certificate and name verified); or the master secret,
 * resolved first.
 */
export async function createSql(config: DatabaseConfig, deps: SqlDependencies = {}): Promise<Sql> {
  if (config.url !== undefined) {
    const host = new URL(config.url).hostname;
    return postgres(config.url, { ...baseOptions(config), ssl: sslOption(config.ssl, host) }) as unknown as Sql;
  }
  if (config.iam !== undefined) {
    if (config.hostOverride === undefined) throw new ConfigError('Invalid configuration: DB_HOST: required with DB_IAM_USER');
    const port = config.port ?? 5432;
    const token = await (deps.signer ?? signTokensWithAws)({
      hostname: config.hostOverride,
      port,
      username: config.iam.user,
      region: config.iam.region,
    });
    return postgres({
      ...baseOptions(config),
      host: config.hostOverride,
      port,
      database: config.name ?? 'postgres',
      username: config.iam.user,
      password: token,
      ssl: verifiedTls(config.hostOverride),
    }) as unknown as Sql;
  }
  if (config.secretArn === undefined) throw new Error('no database configured');
  const readSecret = deps.readSecret ?? readSecretFromAws;
  const secret = parseSecret(config.secretArn, await readSecret(config.secretArn));
  const host = config.hostOverride ?? secret.host;
  return postgres({
    ...baseOptions(config),
    host,
    port: config.port ?? secret.port ?? 5432,
    database: config.name ?? secret.dbname ?? 'postgres',
    username: secret.username,
    password: secret.password,
    ssl: sslOption(config.ssl, host),
  }) as unknown as Sql;
}

let shared: Promise<Sql> | undefined;

/**
 * The container's shared client. The first call builds it; a failed build is forgotten
 * so that the next invocation tries again instead of failing forever.
 */
export function getSql(config: DatabaseConfig): Promise<Sql> {
  if (shared === undefined) {
    shared = createSql(config).catch((error: unknown) => {
      shared = undefined;
      throw error;
    });
  }
  return shared;
}
