/**
 * The functions as they ship: each handler bundled with the CDK app's esbuild settings
 * (tools/bundle.ts: ESM, minified, AWS SDK clients external), then imported and invoked in a fresh Node.js
 * process against a real database — configured only through its environment, as in
 * Lambda, and connected as its own database role (the migration function as the owner).
 * Catches what unit tests cannot: module-format and bundling problems, cold-start
 * configuration, and the migration function finding its bundled SQL files.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import {
  DatabaseRoles,
  ingestRoleOf,
  relayRoleOf,
  runtimeRoles,
  workerRoleOf,
  type DatabaseRole,
} from '../../functions/lib/database-roles';
import { CONSUMERS, getConsumer } from '../../functions/consumers';
import { loadMigrations, MIGRATIONS_DIR } from '../../functions/lib/migration-files';
import { withDatabase } from '../../tools/database-url';
import { caseAccepted } from '../../tools/case-events';
import { functionUrlRequest, OPERATOR_ROLE, OPERATOR_SESSION } from '../../tools/function-url-events';
import { mskEvent, mskRecord } from '../../tools/msk-events';
import { JSON_RECORD_FORMAT, SOURCE_RECORD_FORMAT } from '../fixtures/schema-registry/events';
import { bundledFunctions, relayWithoutBrokers, resultOf, type Bundles, type FunctionName as Fn } from '../helpers/bundles';
import { useTestDatabase } from '../helpers/db';
import { packagesThatRan } from '../helpers/packages-that-ran';
import {
  avroEncoder,
  CASE_AVRO_SCHEMA,
  CASE_PROTO,
  caseEventToAvro,
  caseEventToProto,
  glueFrame,
  glueMessageIndex,
  protobufEncoder,
} from '../../tools/registry-values';

const db = await useTestDatabase();
let bundles: Bundles;

beforeAll(async () => {
  // The ingest bundle with its source map beside it (the bundle's bytes unchanged): which packages ran, below.
  bundles = await bundledFunctions('bundles', { sourcemap: ['ingest'] });
}, 120_000);

afterAll(() => bundles.remove());

// Each test starts from empty tables: the functions' rows of one test are not another's.
beforeEach(async () => {
  await db.sql`
    truncate integration.consumer_inbox, integration.consumer_raw_poison, read_model.case_summary,
             case_core.sla_obligation, public.notification_jobs, integration.consumer_worker_slot`;
});

/** The role each bundled function connects as in AWS (the ingest's depends on its consumer's mode). */
function roleOf(fn: Exclude<Fn, 'migrate'>, env: Record<string, string>): DatabaseRole {
  if (fn === 'ingest') return ingestRoleOf(getConsumer(env.CONSUMER_NAME ?? ''));
  if (fn === 'worker') return workerRoleOf(getConsumer(env.CONSUMER_NAME ?? ''));
  // A relay's is its consumer's; without one it fails its cold start before it connects.
  if (fn === 'relay') return env.CONSUMER_NAME === undefined ? DatabaseRoles.relay : relayRoleOf(getConsumer(env.CONSUMER_NAME));
  return DatabaseRoles[fn];
}

/** The URL a bundled function connects with: its own role's (the migration function: the owner's). */
function urlFor(fn: Fn, env: Record<string, string>): string {
  return fn === 'migrate' ? db.url : db.urlAs(roleOf(fn, env));
}

/** Invoke a bundled handler in its own process; its output (JSON log lines, the result). */
function invokeOutput(fn: Fn, event: unknown, env: Record<string, string>, databaseUrl = urlFor(fn, env)) {
  return bundles.invokeOutput(fn, event, { DATABASE_URL: databaseUrl, ...env });
}

async function invoke(fn: Fn, event: unknown, env: Record<string, string>, databaseUrl = urlFor(fn, env)): Promise<any> {
  return bundles.invoke(fn, event, { DATABASE_URL: databaseUrl, ...env });
}

describe('the bundled functions', () => {
  it('migrate: applies the bundled migration files to an empty database, then finds nothing to do', async () => {
    const adminUrl = inject('dbAdminUrl');
    const name = `${db.name}_empty`;
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${name}"`);
    try {
      const emptyUrl = withDatabase(adminUrl, name);
      const files = (await loadMigrations(MIGRATIONS_DIR)).map((m) => m.name);
      expect(await invoke('migrate', {}, {}, emptyUrl)).toEqual({ applied: files, alreadyApplied: 0, newer: [] });
      expect(await invoke('migrate', {}, {}, emptyUrl)).toEqual({ applied: [], alreadyApplied: files.length, newer: [] });
      // Database-level privileges are not copied to clones, so they are checked here, on a database the migrations made.
      const [temp] = await admin<{ roles: string[] }[]>`
        select array(select r from unnest(${runtimeRoles(CONSUMERS)}::text[]) as r
                     where has_database_privilege(r, ${name}, 'TEMPORARY') or has_database_privilege(r, ${name}, 'CREATE')) as roles`;
      expect(temp).toEqual({ roles: [] });
    } finally {
      await admin.unsafe(`drop database if exists "${name}" with (force)`);
      await admin.end();
    }
  });

  it('migrate: on a database a later release migrated (a rollback), applies nothing and leaves the roles as they are', async () => {
    const projectionWorker = workerRoleOf(getConsumer('case-projection'));
    const canRead = async () =>
      (await db.sql<{ ok: boolean }[]>`select has_table_privilege(${projectionWorker}, 'read_model.case_summary', 'SELECT') as ok`)[0]!.ok;
    await db.sql`insert into public.inbox_schema_history (version, name, checksum) values (9001, '9001_later_release.sql', 'statements-sha256:00')`;
    // What provisioning would grant back, were it to run.
    await db.sql`revoke select on read_model.case_summary from ${db.sql(projectionWorker)}`;
    try {
      const files = (await loadMigrations(MIGRATIONS_DIR)).map((m) => m.name);
      const { stdout } = await invokeOutput('migrate', {}, { LOG_LEVEL: 'INFO' });
      expect(resultOf({ stdout, stderr: '' })).toEqual({ applied: [], alreadyApplied: files.length, newer: ['9001_later_release.sql'] });
      expect(stdout).toContain('a later release migrated this database (9001_later_release.sql)');
      expect(await canRead()).toBe(false);
    } finally {
      await db.sql`delete from public.inbox_schema_history where version = 9001`;
      await db.sql`grant select on read_model.case_summary to ${db.sql(projectionWorker)}`;
    }
  });

  it('ingest → worker → reaper → ops: one batch stored, processed, reported', async () => {
    const topic = 'regulatory.case.events.v1';
    const event = mskEvent([
      mskRecord({ topic, partition: 0, offset: 10, value: caseAccepted('case_b1', 'evt_b1') }),
      mskRecord({ topic, partition: 0, offset: 11, rawValue: Buffer.from('not json').toString('base64') }),
      mskRecord({ topic, partition: 1, offset: 7, value: caseAccepted('case_b2', 'evt_b2') }),
    ]);
    const consumer = { CONSUMER_NAME: 'case-projection' };

    expect(await invoke('ingest', event, consumer)).toEqual({ batchItemFailures: [] });
    expect(await db.sql`select event_id, status from integration.consumer_inbox order by event_id`).toEqual([
      { event_id: 'evt_b1', status: 'RECEIVED' },
      { event_id: 'evt_b2', status: 'RECEIVED' },
    ]);
    expect(await db.sql`select offset_no, error_code from integration.consumer_raw_poison`).toEqual([
      { offset_no: 11, error_code: 'INVALID_JSON' },
    ]);

    // WORKER_IDLE_MS 0: it stops at the first empty claim instead of staying awake for more rows.
    expect(await invoke('worker', { source: 'schedule' }, { ...consumer, WORKER_IDLE_MS: '0' })).toMatchObject({
      claimed: 2,
      processed: 2,
      retried: 0,
      quarantined: 0,
      ignored: 0,
    });
    expect(await db.sql`select case_id, case_status from read_model.case_summary order by case_id`).toEqual([
      { case_id: 'case_b1', case_status: 'ACCEPTED' },
      { case_id: 'case_b2', case_status: 'ACCEPTED' },
    ]);

    expect(await invoke('reaper', { source: 'schedule' }, {})).toEqual({ released: 0, quarantined: 0, purged: 0 });

    // An inline consumer's ingest processes in its own transaction, as inbox_ingest_inline.
    const payment = mskEvent([
      mskRecord({
        topic: 'payment.completed',
        partition: 0,
        offset: 3,
        value: {
          event_id: '0b9f2d7e-1c1a-4f7e-9a55-3c1d2e4f5a6b',
          event_type: 'payment.completed',
          event_version: 1,
          org_id: '7d1f2c4e-8a9b-4c3d-9e8f-1a2b3c4d5e6f',
          aggregate_id: 'pay_b1',
          occurred_at: '2026-07-03T09:15:30Z',
          payload: { amount: 1 },
        },
      }),
    ]);
    expect(await invoke('ingest', payment, { CONSUMER_NAME: 'notification-service' })).toEqual({ batchItemFailures: [] });
    expect(await db.sql`select source_event_id from public.notification_jobs`).toEqual([
      { source_event_id: '0b9f2d7e-1c1a-4f7e-9a55-3c1d2e4f5a6b' },
    ]);

    // Operators call ops through its function URL, signed (the caller's IAM identity is the actor).
    const ops = async (body: Record<string, unknown>) => {
      const response = await invoke('ops', functionUrlRequest(body, OPERATOR_SESSION), {
        OPERATOR_PRINCIPALS: JSON.stringify([OPERATOR_ROLE]),
      });
      expect(response).toMatchObject({ statusCode: 200, headers: { 'content-type': 'application/json' } });
      return JSON.parse(response.body);
    };
    expect(await invoke('ops', { command: 'stats' }, {})).toMatchObject({ ok: false, error: { code: 'FUNCTION_URL_REQUIRED' } });
    const stats = await ops({ command: 'stats', consumer: 'case-projection' });
    expect(stats).toMatchObject({ ok: true, command: 'stats' });
    expect(JSON.stringify(stats.result)).toContain('PROCESSED');
    expect(stats.result.received.rows).toEqual([{ consumer: 'case-projection', eventType: 'regulatory.case.accepted.v1', received: 2 }]);

    const stored = await ops({ command: 'event', eventId: 'evt_b1' });
    expect(stored.result.events).toEqual([
      expect.objectContaining({ consumer: 'case-projection', status: 'PROCESSED', kafka: expect.objectContaining({ offset: 10 }) }),
    ]);
    const poisoned = await ops({ command: 'event', topic, partition: 0, offset: 11 });
    expect(poisoned.result).toMatchObject({ events: [], poison: [{ consumer_name: 'case-projection', error_code: 'INVALID_JSON' }] });
  });

  it('ingest: the batches of a schema-registry mapping (JSON and SOURCE record formats) are stored or poisoned, none reported back', async () => {
    const consumer = { CONSUMER_NAME: 'notification-service' };

    expect(await invoke('ingest', JSON_RECORD_FORMAT, consumer)).toEqual({ batchItemFailures: [] });
    expect(await invoke('ingest', SOURCE_RECORD_FORMAT, consumer)).toEqual({ batchItemFailures: [] });

    expect(
      await db.sql`
        select partition_no, offset_no, status from integration.consumer_inbox
        where consumer_name = 'notification-service' order by partition_no, offset_no`,
    ).toEqual([
      { partition_no: 0, offset_no: 40, status: 'PROCESSED' },
      { partition_no: 0, offset_no: 42, status: 'PROCESSED' },
      { partition_no: 1, offset_no: 7, status: 'PROCESSED' },
      { partition_no: 2, offset_no: 52, status: 'PROCESSED' },
    ]);
    expect(
      await db.sql`
        select offset_no, error_code from integration.consumer_raw_poison
        where consumer_name = 'notification-service' order by offset_no`,
    ).toEqual([
      { offset_no: 41, error_code: 'ENVELOPE_INVALID' },
      { offset_no: 50, error_code: 'UNSUPPORTED_SOURCE_FORMAT' },
      { offset_no: 51, error_code: 'UNSUPPORTED_SOURCE_FORMAT' },
      { offset_no: 53, error_code: 'ENVELOPE_INVALID' },
    ]);
  });

  it('ingest → worker → relay: case-sla’s obligation event is emitted; with no broker to reach the relay marks nothing published', async () => {
    const topic = 'regulatory.case.events.v1';
    const consumer = { CONSUMER_NAME: 'case-sla' };
    await invoke('ingest', mskEvent([mskRecord({ topic, partition: 2, offset: 5, value: caseAccepted('case_r1', 'evt_r1') })]), consumer);
    expect(await invoke('worker', { source: 'schedule' }, consumer)).toMatchObject({ claimed: 1, processed: 1 });

    const relay = await invoke('relay', { source: 'schedule' }, { ...consumer, ...(await relayWithoutBrokers()) });

    expect(relay).toEqual({ claimed: 1, published: 0, refused: 1, returned: 0, lost: 0, purged: 0 });
    expect(
      await db.sql`select source_event_id, aggregate_id, published_at, attempt_count, last_error_code from integration.outbox`,
    ).toEqual([
      { source_event_id: 'evt_r1', aggregate_id: 'case_r1', published_at: null, attempt_count: 1, last_error_code: 'PUBLISH_REFUSED' },
    ]);
  });

  it('the relay without brokers or region fails its cold start naming both', async () => {
    await expect(invoke('relay', {}, {})).rejects.toMatchObject({
      stderr: expect.stringContaining('KAFKA_BROKERS: required for the relay; AWS_REGION: required for the relay'),
    });
  });

  it('a function with a bad configuration fails its cold start naming the variable', async () => {
    await expect(
      invoke('ingest', mskEvent([]), { CONSUMER_NAME: 'no-such-consumer' }, db.urlAs(DatabaseRoles.ingest)),
    ).rejects.toMatchObject({
      stderr: expect.stringContaining('CONSUMER_NAME: "no-such-consumer", but this function is built for consumer "case-projection"'),
    });
  });
});

describe('the bundled ingest wakes its worker', () => {
  interface Received {
    method: string | undefined;
    url: string | undefined;
    invocationType: string | string[] | undefined;
    body: unknown;
  }

  /**
   * A stand-in for the Lambda API on this machine: the bundle's SDK client sends its Invoke
   * here (AWS_ENDPOINT_URL_LAMBDA, the SDK's own setting), and it accepts, fails, or never answers.
   */
  async function lambdaApi(answer: 'accept' | 'fail' | 'hang') {
    const received: Received[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({
          method: req.method,
          url: req.url,
          invocationType: req.headers['x-amz-invocation-type'],
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
        });
        if (answer === 'accept') res.writeHead(202).end();
        if (answer === 'fail')
          res
            .writeHead(500, { 'x-amzn-errortype': 'ServiceException', 'content-type': 'application/json' })
            .end('{"message":"unavailable"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      received,
      env: {
        CONSUMER_NAME: 'case-projection',
        WORKER_FUNCTION_NAME: 'inbox-case-projection-worker',
        AWS_ENDPOINT_URL_LAMBDA: `http://127.0.0.1:${port}`,
        AWS_REGION: 'eu-west-1',
        // Placeholders: the stand-in checks no signature.
        AWS_ACCESS_KEY_ID: 'bundle-test',
        AWS_SECRET_ACCESS_KEY: 'bundle-test',
        LOG_LEVEL: 'WARN',
      },
      close: () => {
        server.closeAllConnections();
        return new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  }

  const batch = () =>
    mskEvent([
      mskRecord({ topic: 'regulatory.case.events.v1', partition: 0, offset: 1, value: caseAccepted('case_w1', `evt_w1_${Date.now()}`) }),
    ]);

  it('sends one asynchronous Invoke of its worker, with the slot it reserved, after storing the batch', async () => {
    const api = await lambdaApi('accept');
    try {
      expect(await invoke('ingest', batch(), api.env)).toEqual({ batchItemFailures: [] });
      expect(api.received).toEqual([
        {
          method: 'POST',
          url: '/2015-03-31/functions/inbox-case-projection-worker/invocations',
          invocationType: 'Event',
          body: { source: 'wake-up', consumerName: 'case-projection', slot: 1, invitation: 'wake-up:req-ingest' },
        },
      ]);
      expect(await db.sql`select status from integration.consumer_inbox`).toEqual([{ status: 'RECEIVED' }]);
    } finally {
      await api.close();
    }
  });

  it.each([
    ['fails', 'fail'],
    ['never answers', 'hang'],
  ] as const)('answers the batch as stored when the Lambda API %s, trying once, logging no payload', async (_, answer) => {
    const api = await lambdaApi(answer);
    try {
      const output = await invokeOutput('ingest', batch(), api.env);
      const { stdout, stderr } = output;
      const result = resultOf(output);
      const warning = `${stdout}\n${stderr}`.split('\n').find((l) => l.startsWith('{') && l.includes('"wake_up_failed"'));

      expect(result).toEqual({ batchItemFailures: [] });
      expect(api.received).toHaveLength(1);
      expect(await db.sql`select status from integration.consumer_inbox`).toEqual([{ status: 'RECEIVED' }]);
      expect(JSON.parse(warning!)).toMatchObject({ level: 'WARN', consumerName: 'case-projection', source: 'wake-up', stage: 'invoke' });
      expect(warning).not.toContain('acceptedAt');
    } finally {
      await api.close();
    }
  });
});

describe('the log level, as Powertools documents it', () => {
  /** The levels of the JSON log lines the reaper printed in one invocation. */
  const reaperLogLevels = async (env: Record<string, string>) => {
    const { stdout, stderr } = await invokeOutput('reaper', { source: 'schedule' }, env);
    return `${stdout}\n${stderr}`
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => (JSON.parse(l) as { level: string }).level);
  };

  it('follows POWERTOOLS_LOG_LEVEL over LOG_LEVEL (the functions no longer pass a level of their own)', async () => {
    expect(await reaperLogLevels({ POWERTOOLS_LOG_LEVEL: 'INFO', LOG_LEVEL: 'ERROR' })).toContain('INFO');
    expect(await reaperLogLevels({ POWERTOOLS_LOG_LEVEL: 'WARN', LOG_LEVEL: 'DEBUG' })).not.toContain('INFO');
  });

  it("lets Lambda's AWS_LAMBDA_LOG_LEVEL (the CDK's logging configuration) win over POWERTOOLS_LOG_LEVEL", async () => {
    const levels = await reaperLogLevels({ AWS_LAMBDA_LOG_LEVEL: 'ERROR', POWERTOOLS_LOG_LEVEL: 'DEBUG' });
    expect(levels.filter((l) => l === 'DEBUG' || l === 'INFO' || l === 'WARN')).toEqual([]);
    expect(await reaperLogLevels({ AWS_LAMBDA_LOG_LEVEL: 'INFO', POWERTOOLS_LOG_LEVEL: 'ERROR' })).toContain('INFO');
  });
});

describe('the bundled ingest loads its decoders on demand', () => {
  const GLUE_AVRO = 'b7a3c8e2-5f14-4d6a-9c0b-1e2f3a4b5c6d';
  const GLUE_PROTO = 'c8b4d9f3-6a25-4e7b-8d1c-2f3a4b5c6d7e';

  /**
   * A stand-in for the Glue API on this machine (AWS_ENDPOINT_URL_GLUE, the SDK's own
   * setting): GetSchemaVersion answers the two case envelope schemas by version id.
   */
  async function glueApi() {
    const targets: string[] = [];
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        targets.push(String(req.headers['x-amz-target']));
        const { SchemaVersionId } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { SchemaVersionId: string };
        const schema =
          SchemaVersionId === GLUE_AVRO
            ? { SchemaDefinition: JSON.stringify(CASE_AVRO_SCHEMA), DataFormat: 'AVRO' }
            : { SchemaDefinition: CASE_PROTO, DataFormat: 'PROTOBUF' };
        res
          .writeHead(200, { 'content-type': 'application/x-amz-json-1.1' })
          .end(JSON.stringify({ ...schema, SchemaVersionId, Status: 'AVAILABLE' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return {
      targets,
      endpoint: `http://127.0.0.1:${port}`,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    };
  }

  /** The ingest bundle invoked with V8 coverage on: which packages' code ran. */
  async function ingestCoverage(event: unknown, env: Record<string, string>) {
    const coverageDir = await mkdtemp(`${tmpdir()}/ingest-coverage-`);
    try {
      const result = await invoke('ingest', event, { ...env, NODE_V8_COVERAGE: coverageDir });
      return { result, ran: await packagesThatRan(coverageDir, bundles.file('ingest', env.CONSUMER_NAME)) };
    } finally {
      await rm(coverageDir, { recursive: true, force: true });
    }
  }

  it('a JSON consumer’s batch runs no code of avsc, protobufjs, the Glue client or the Secrets Manager client', async () => {
    const event = mskEvent([
      mskRecord({ topic: 'regulatory.case.events.v1', partition: 0, offset: 1, value: caseAccepted('case_j1', 'evt_j1') }),
    ]);

    const { result, ran } = await ingestCoverage(event, { CONSUMER_NAME: 'case-projection' });

    expect(result).toEqual({ batchItemFailures: [] });
    // The probe sees the code that did run: the function's own, and its envelope schemas.
    expect(ran.bundled).toContain('(project)');
    expect(ran.bundled).toContain('zod');
    for (const decoder of ['avsc', 'protobufjs']) expect(ran.bundled).not.toContain(decoder);
    for (const client of ['@aws-sdk/client-glue', '@aws-sdk/client-secrets-manager']) expect(ran.loaded).not.toContain(client);
  });

  it('a Glue consumer loads the Glue client, avsc and protobufjs with its first binary values, and stores them', async () => {
    const glue = await glueApi();
    try {
      const avroValue = glueFrame(GLUE_AVRO, avroEncoder(CASE_AVRO_SCHEMA)(caseEventToAvro(caseAccepted('case_g1', 'evt_g1'))));
      const protoBody = protobufEncoder(CASE_PROTO, 'regulatory.case.v1.CaseEvent')(caseEventToProto(caseAccepted('case_g2', 'evt_g2')));
      const protoValue = glueFrame(GLUE_PROTO, Buffer.concat([glueMessageIndex(1), protoBody]));
      const event = mskEvent([
        mskRecord({ topic: 'regulatory.case.events.v1', partition: 0, offset: 1, value: avroValue }),
        mskRecord({ topic: 'regulatory.case.events.v1', partition: 0, offset: 2, value: protoValue }),
      ]);

      const { result, ran } = await ingestCoverage(event, {
        CONSUMER_NAME: 'case-projection',
        SCHEMA_REGISTRY: JSON.stringify({ type: 'glue', registryArn: 'arn:aws:glue:eu-west-1:123456789012:registry/cases' }),
        AWS_ENDPOINT_URL_GLUE: glue.endpoint,
        // Placeholders: the stand-in checks no signature.
        AWS_ACCESS_KEY_ID: 'bundle-test',
        AWS_SECRET_ACCESS_KEY: 'bundle-test',
      });

      expect(result).toEqual({ batchItemFailures: [] });
      expect(glue.targets).toEqual(['AWSGlue.GetSchemaVersion', 'AWSGlue.GetSchemaVersion']);
      expect(await db.sql`select event_id, status from integration.consumer_inbox order by event_id`).toEqual([
        { event_id: 'evt_g1', status: 'RECEIVED' },
        { event_id: 'evt_g2', status: 'RECEIVED' },
      ]);
      expect(ran.bundled).toContain('avsc');
      expect(ran.bundled).toContain('protobufjs');
      expect(ran.loaded).toContain('@aws-sdk/client-glue');
      expect(ran.loaded).not.toContain('@aws-sdk/client-secrets-manager');
    } finally {
      await glue.close();
    }
  });
});
