/**
 * The postgres.js client, built once per Lambda container from the configuration.
 *
 * Lambda freezes the process between invocations, so the client lives at module scope with
 * a small pool, and what a freeze does to it is handled here (docs/design.md, "Connections"):
 * its sockets are watched (db-connections.ts), so that a handler's invocation begins by
 * closing the connections that went stale while frozen (beginInvocation), no statement waits
 * on a dead peer past its bound or the invocation's deadline, and work that failed on a dead
 * connection before anything was done runs once more on a new one (retryOnDeadConnection).
 * A connection lives as long as it is used: no recycling by age. The startup message says
 * who and where only (user, database, application_name); the session's timeouts are the
 * role's own settings (session-settings.ts), which RDS Proxy and other poolers need.
 */
import { checkServerIdentity, type ConnectionOptions, type PeerCertificate } from 'node:tls';
import postgres from 'postgres';
import { ConfigError } from './config';
import type { DatabaseConfig } from './config-database';
import { Connections } from './db-connections';
import { isConnectionError } from './errors';

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

/** Builds the token source of one client: it signs a token each time it is called. */
export type TokenSigner = (target: TokenTarget) => Promise<() => Promise<string>>;

export interface SqlDependencies {
  readSecret?: SecretReader;
  signer?: TokenSigner;
  /** The clock the connections' idle times are read on (performance.now()); tests move it to stand for a freeze. */
  clock?: () => number;
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
 * (SigV4 presigning: no API call). One Signer per client; each call signs anew (reuseToken
 * decides when to call it).
 */
export const signTokensWithAws: TokenSigner = async ({ hostname, port, username, region }) => {
  const { Signer } = await import('@aws-sdk/rds-signer');
  const signer = new Signer({ hostname, port, username, region });
  return () => signer.getAuthToken();
};

function isLocalHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.') || host.startsWith('/');
}

/** TLS as the client's connections negotiate it (db-connections.ts), or none. */
type TlsOptions = false | Omit<ConnectionOptions, 'socket' | 'host' | 'port'>;

/**
 * TLS with the server's certificate checked against the trusted CAs and against `host`.
 * Not Node's own name check: it checks an IP address host against "localhost"
 * (test/db/foundation/iam-tls.test.ts).
 */
export function verifiedTls(host: string): TlsOptions {
  return { rejectUnauthorized: true, checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(host, cert) };
}

/** 'require' encrypts without checking whom it talks to; 'verify-full' checks the certificate and the name. */
function tlsOf(mode: DatabaseConfig['ssl'], host: string): TlsOptions {
  const effective = mode ?? (isLocalHost(host) ? 'disable' : 'require');
  if (effective === 'disable') return false;
  if (effective === 'verify-full') return verifiedTls(host);
  return { rejectUnauthorized: false };
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

/** What the client's application_name says in pg_stat_activity and the server's log. */
export const APPLICATION_NAME = 'kafka-inbox';

/**
 * How long an IAM token is accepted after it is signed (RDS: 15 minutes), and how long
 * before that the client signs a new one. A token is only read when a connection opens: a
 * session outlives its token, so reusing one costs nothing until it is about to expire.
 */
export const TOKEN_LIFETIME_MS = 15 * 60_000;
export const TOKEN_REFRESH_BEFORE_MS = 3 * 60_000;

/**
 * One token for as many connections as open while it is fresh: a container, a fan-out or a
 * deploy opening connections at once asks the signer once, not once per connection. A
 * token not signed (the signer failed) is not kept.
 */
export function reuseToken(sign: () => Promise<string>, now: () => number = Date.now): () => Promise<string> {
  let current: { token: Promise<string>; signedAt: number } | undefined;
  return () => {
    if (current === undefined || now() - current.signedAt >= TOKEN_LIFETIME_MS - TOKEN_REFRESH_BEFORE_MS) {
      const signing = { token: sign(), signedAt: now() };
      current = signing;
      signing.token.catch(() => {
        if (current === signing) current = undefined;
      });
    }
    return current.token;
  };
}

/** postgres.js's options and its `socket` option, which its types do not declare: a function returning the socket to use. */
type ClientOptions = postgres.Options<{}> & { socket: Connections['open'] };

function baseOptions(config: DatabaseConfig, connections: Connections): ClientOptions {
  return {
    max: config.poolMax,
    idle_timeout: config.idleTimeoutSeconds,
    connect_timeout: config.connectTimeoutSeconds,
    // No recycling by age: a connection ends when it idles out, breaks or the server ends it.
    // A failover breaks it; an IAM token is only checked when a connection opens.
    max_lifetime: null,
    prepare: config.prepare,
    onnotice: () => {},
    socket: connections.open,
    // TLS is negotiated by the connections themselves (db-connections.ts): postgres.js sees plain frames.
    ssl: false,
    // Only user, database and application_name (postgres.js adds client_encoding unless it
    // is given empty): the encoding and the timeouts are the role's settings.
    connection: { application_name: APPLICATION_NAME, client_encoding: '' },
    types: TYPES,
  };
}

/** A client's watched connections, and after how long idle a connection is stale at an invocation's start. */
interface Watch {
  connections: Connections;
  staleAfterMs: number;
}

const watches = new WeakMap<object, Watch>();

function watchOf(config: DatabaseConfig, deps: SqlDependencies, host: string, port: number, tls: TlsOptions): Watch {
  return {
    connections: new Connections({ host, port, tls, boundMs: config.queryTimeoutMs, ...(deps.clock ? { now: deps.clock } : {}) }),
    staleAfterMs: config.idleTimeoutSeconds * 1000,
  };
}

function watched(sql: Sql, watch: Watch): Sql {
  watches.set(sql, watch);
  return sql;
}

/** The watched connections of a client made by createSql (tests, logs); undefined for any other client. */
export function connectionsOf(sql: Sql): Connections | undefined {
  return watches.get(sql)?.connections;
}

/**
 * Time left when a query still waiting is cut off: enough for the handler to log, publish
 * its metrics and return before Lambda ends the invocation.
 */
export const DEADLINE_RESERVE_MS = 1_000;

/**
 * A handler's invocation begins: no query of `sql` may wait past its deadline, and the
 * connections that idled past the client's idle timeout (a freeze) are closed before any
 * statement is written to them. No statement is sent. Clients not made by createSql are
 * left as they are.
 */
export async function beginInvocation(sql: Sql, context: { getRemainingTimeInMillis(): number }): Promise<void> {
  const watch = watches.get(sql);
  if (watch === undefined) return;
  await watch.connections.beginInvocation(context.getRemainingTimeInMillis() - DEADLINE_RESERVE_MS, watch.staleAfterMs);
}

/**
 * Run `work`; if it fails on a broken connection before the server answered anything, run
 * it once more, on a new connection (the pool's idle connections are closed first: after a
 * freeze they are as suspect as the one that failed). Anything the server answered means
 * something may have been done, and the error goes to the caller as it is. `onRetry` is told
 * before the second run.
 *
 * @example
 *   const result = await retryOnDeadConnection(sql, () => runOnce(deps), (error) => logger.warn('retried', …));
 */
export async function retryOnDeadConnection<T>(sql: Sql, work: () => Promise<T>, onRetry?: (error: unknown) => void): Promise<T> {
  const connections = watches.get(sql)?.connections;
  if (connections === undefined) return work();
  const before = connections.progress();
  try {
    return await work();
  } catch (error) {
    if (!isConnectionError(error) || connections.progress() !== before) throw error;
    await connections.closeIdle();
    onRetry?.(error);
    return work();
  }
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
 * password function: postgres.js calls it for each new connection, and it hands out one
 * token while it is fresh; TLS with the server's certificate and name verified); or the
 * master secret, resolved first.
 */
export async function createSql(config: DatabaseConfig, deps: SqlDependencies = {}): Promise<Sql> {
  if (config.url !== undefined) {
    const url = new URL(config.url);
    // A socket directory (?host=/run/postgresql) as libpq and postgres.js take it, else the URL's host.
    const host = url.searchParams.get('host') ?? (decodeURIComponent(url.hostname) || 'localhost');
    const watch = watchOf(config, deps, host, Number(url.port || 5432), tlsOf(config.ssl, host));
    return watched(postgres(config.url, baseOptions(config, watch.connections)) as unknown as Sql, watch);
  }
  if (config.iam !== undefined) {
    if (config.hostOverride === undefined) throw new ConfigError('Invalid configuration: DB_HOST: required with DB_IAM_USER');
    const port = config.port ?? 5432;
    const sign = await (deps.signer ?? signTokensWithAws)({
      hostname: config.hostOverride,
      port,
      username: config.iam.user,
      region: config.iam.region,
    });
    const watch = watchOf(config, deps, config.hostOverride, port, verifiedTls(config.hostOverride));
    return watched(
      postgres({
        ...baseOptions(config, watch.connections),
        host: config.hostOverride,
        port,
        database: config.name ?? 'postgres',
        username: config.iam.user,
        password: reuseToken(sign),
      }) as unknown as Sql,
      watch,
    );
  }
  if (config.secretArn === undefined) throw new Error('no database configured');
  const readSecret = deps.readSecret ?? readSecretFromAws;
  const secret = parseSecret(config.secretArn, await readSecret(config.secretArn));
  const host = config.hostOverride ?? secret.host;
  const port = config.port ?? secret.port ?? 5432;
  const watch = watchOf(config, deps, host, port, tlsOf(config.ssl, host));
  return watched(
    postgres({
      ...baseOptions(config, watch.connections),
      host,
      port,
      database: config.name ?? secret.dbname ?? 'postgres',
      username: secret.username,
      password: secret.password,
    }) as unknown as Sql,
    watch,
  );
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
