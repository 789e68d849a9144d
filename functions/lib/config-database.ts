/**
 * The database settings every function reads: where to connect (one of DATABASE_URL,
 * DB_SECRET_ARN, DB_IAM_USER), how, and how long the client waits. The session's own
 * timeouts are not here: they are settings of the role (session-settings.ts).
 */
import { z } from 'zod';
import { DEFAULTS } from './config-defaults';
import { boolean, integer, postgresUrl } from './env-values';

export const databaseEnv = {
  DATABASE_URL: postgresUrl
    .optional()
    .describe(
      "A full connection string (local runs, tests; as a function's role, e.g. postgres://inbox_ops:…@…). One of DATABASE_URL, DB_SECRET_ARN, DB_IAM_USER.",
    ),
  DB_SECRET_ARN: z
    .string()
    .trim()
    .startsWith('arn:', 'must be a secret ARN')
    .optional()
    .describe(
      "The cluster's master secret (its JSON carries host, port, username, password, dbname): the migration function's, and only its, in AWS. The password never appears in the environment.",
    ),
  DB_IAM_USER: z
    .string()
    .trim()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a database role name')
    .optional()
    .describe(
      'The database role to connect as with IAM database authentication (the runtime functions in AWS): every new connection signs a token; no password exists. Needs DB_HOST, DB_NAME and AWS_REGION.',
    ),
  DB_HOST: z.string().trim().min(1).optional().describe("The database host (cluster or RDS Proxy endpoint); overrides the secret's host."),
  DB_PORT: integer(1, 65_535).optional().describe("The database port; default the secret's, else 5432."),
  DB_NAME: z.string().trim().min(1).optional().describe("The database name; default the secret's."),
  AWS_REGION: z
    .string()
    .trim()
    .regex(/^[a-z]{2}(-gov)?-[a-z]+-\d$/, 'must be a region such as eu-west-1')
    .optional()
    .describe('Set by Lambda: the region IAM database tokens and MSK IAM tokens are signed for.'),
  DB_SSL: z
    .enum(['disable', 'require', 'verify-full'])
    .optional()
    .describe(
      'TLS to the database: require by default (disable for localhost); verify-full checks the chain and the host name, and is the only value allowed with DB_IAM_USER.',
    ),
  DB_PREPARE: boolean.default(true).describe('false behind RDS Proxy or PgBouncer: named prepared statements pin a proxied session.'),
  DB_POOL_MAX: integer(1, 100)
    .default(DEFAULTS.dbPoolMax)
    .describe(
      "Connections one container may open at most: what the stage's connection budget counts (docs/capacity.md). The CDK app sets 1, the ops function 2.",
    ),
  DB_IDLE_TIMEOUT_SECONDS: integer(1, 3600)
    .default(DEFAULTS.dbIdleTimeoutSeconds)
    .describe(
      "An idle connection is closed after this long; one that idled longer while the container was frozen is closed when the next invocation begins, before anything is sent on it. Below the roles' idle_session_timeout, above the schedules' minute.",
    ),
  DB_CONNECT_TIMEOUT_SECONDS: integer(1, 60)
    .default(DEFAULTS.dbConnectTimeoutSeconds)
    .describe('Well inside the Lambda timeout: an unreachable database is reported, not waited for.'),
  DB_QUERY_TIMEOUT_MS: integer(0, 15 * 60 * 1000)
    .default(DEFAULTS.dbQueryTimeoutMs)
    .describe(
      "A connection that owes an answer and has heard nothing this long is taken for dead and closed, failing its statement at once (0: never). Above the role's statement_timeout, so the server cancels a slow statement first; the CDK app sets it per function. The session timeouts themselves are settings of each role, not variables (docs/design.md §12).",
    ),
  DB_STATEMENT_TIMEOUT_MS: z
    .string()
    .optional()
    .describe("Retired, refused: statement_timeout is a setting of the function's database role."),
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: z
    .string()
    .optional()
    .describe("Retired, refused: idle_in_transaction_session_timeout is a setting of the function's database role."),
};

/** Variables no longer read, and what replaced them. */
const RETIRED = {
  DB_STATEMENT_TIMEOUT_MS: "statement_timeout is a setting of the function's database role, kept by the migration step",
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS:
    "idle_in_transaction_session_timeout is a setting of the function's database role, kept by the migration step",
} as const;

type DatabaseEnv = z.infer<z.ZodObject<typeof databaseEnv>>;

/** One source of credentials, and with IAM authentication what it needs: checked across variables. */
export function refineDatabaseEnv(env: DatabaseEnv, ctx: z.RefinementCtx): void {
  for (const [key, instead] of Object.entries(RETIRED) as [keyof typeof RETIRED, string][]) {
    // A session setting in the startup message is what RDS Proxy refuses: say where it went.
    if (env[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: `no longer read: ${instead}` });
  }
  const sources = (['DATABASE_URL', 'DB_SECRET_ARN', 'DB_IAM_USER'] as const).filter((k) => env[k] !== undefined);
  if (sources.length === 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['DATABASE_URL'],
      message: 'set DATABASE_URL (local), DB_IAM_USER (AWS) or DB_SECRET_ARN (AWS, migrations)',
    });
  }
  if (sources.length > 1) {
    ctx.addIssue({
      code: 'custom',
      path: [sources[1]!],
      message: `set one of DATABASE_URL, DB_SECRET_ARN and DB_IAM_USER, not ${sources.join(' and ')}`,
    });
  }
  if (env.DB_IAM_USER !== undefined) {
    for (const k of ['DB_HOST', 'DB_NAME', 'AWS_REGION'] as const) {
      if (env[k] === undefined) ctx.addIssue({ code: 'custom', path: [k], message: 'required with DB_IAM_USER' });
    }
    // The token is a password good for 15 minutes: it goes only to a server whose certificate and name check out.
    if (env.DB_SSL !== undefined && env.DB_SSL !== 'verify-full') {
      ctx.addIssue({ code: 'custom', path: ['DB_SSL'], message: 'must be verify-full with DB_IAM_USER (an IAM token is a credential)' });
    }
  }
}

export interface DatabaseConfig {
  url?: string;
  secretArn?: string;
  /** IAM database authentication as this role (with hostOverride, port, name and region). */
  iam?: { user: string; region: string };
  hostOverride?: string;
  port?: number;
  name?: string;
  ssl?: 'disable' | 'require' | 'verify-full';
  prepare: boolean;
  poolMax: number;
  idleTimeoutSeconds: number;
  connectTimeoutSeconds: number;
  /** The client's bound on one statement's answer (0: none). */
  queryTimeoutMs: number;
}

export function databaseConfig(e: DatabaseEnv): DatabaseConfig {
  return {
    ...(e.DATABASE_URL !== undefined ? { url: e.DATABASE_URL } : {}),
    ...(e.DB_SECRET_ARN !== undefined ? { secretArn: e.DB_SECRET_ARN } : {}),
    ...(e.DB_IAM_USER !== undefined ? { iam: { user: e.DB_IAM_USER, region: e.AWS_REGION! } } : {}),
    ...(e.DB_HOST !== undefined ? { hostOverride: e.DB_HOST } : {}),
    ...(e.DB_PORT !== undefined ? { port: e.DB_PORT } : {}),
    ...(e.DB_NAME !== undefined ? { name: e.DB_NAME } : {}),
    ...(e.DB_SSL !== undefined ? { ssl: e.DB_SSL } : {}),
    prepare: e.DB_PREPARE,
    poolMax: e.DB_POOL_MAX,
    idleTimeoutSeconds: e.DB_IDLE_TIMEOUT_SECONDS,
    connectTimeoutSeconds: e.DB_CONNECT_TIMEOUT_SECONDS,
    queryTimeoutMs: e.DB_QUERY_TIMEOUT_MS,
  };
}
