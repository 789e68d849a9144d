/**
 * The ops Lambda: `{ command, ...args }` → `{ ok: true, command, result }`, or
 * `{ ok: false, error: { code, message } }` for anything the caller can correct (bad
 * arguments, unknown consumer, nothing matched). Failures of the platform (database
 * unreachable, AWS API errors) are thrown: they count as function errors, which the
 * ops function's alarm watches, and a scheduled replay that failed shows there.
 *
 * Operators call it through its function URL (AWS_IAM auth): the caller's IAM identity,
 * from the request context, is the actor, and the stage's operator principals alone may
 * call it (./function-url.ts). A direct Invoke runs only what the one-time schedules of
 * schedule-replay send; their replay carries the scheduling operator's name. The consumers
 * it knows are the manifest's its bundle carries (functions/framework/manifest.ts): it loads
 * no consumer code.
 */
import { LambdaClient } from '@aws-sdk/client-lambda';
import { S3Client } from '@aws-sdk/client-s3';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { SSMClient } from '@aws-sdk/client-ssm';
import type { ConsumerManifest } from '../framework/manifest';
import { loadConfig } from '../lib/config';
import type { Context } from 'aws-lambda';
import { beginInvocation, getSql, retryOnDeadConnection } from '../lib/db';
import { connectionRetried, createObservability } from '../lib/observability';
import { flushTraces, startTracing } from '../lib/tracing';
import { createOpsHandler } from './run';

export type OpsLambda = (event: unknown, context: Context) => Promise<Awaited<ReturnType<ReturnType<typeof createOpsHandler>>>>;

/** The Lambda handler of the ops function over the manifest's consumers, configured from the environment. */
export async function opsLambda(consumers: ConsumerManifest): Promise<OpsLambda> {
  const config = loadConfig();
  const { logger } = createObservability(config, 'ops');
  // The SDK loads only when OTEL_TRACES_EXPORTER asks for spans (lib/tracing.ts).
  await startTracing(config.tracing, { serviceName: config.observability.serviceName });
  const scheduler = new SchedulerClient({});
  const lambda = new LambdaClient({});
  const ssm = new SSMClient({});
  const s3 = new S3Client({});

  const run = createOpsHandler(
    async () => ({ sql: await getSql(config.database), scheduler, lambda, ssm, s3, config, consumers }),
    logger,
    { operatorPrincipals: config.operatorPrincipals },
  );

  return async function handler(event, context) {
    // No client (no token could be signed): the command's own run reports it, as any failure.
    const sql = await getSql(config.database).catch(() => undefined);
    if (sql === undefined) return run(event, context);
    await beginInvocation(sql, context);
    // Lambda freezes the process after returning: an action's spans go now or never.
    return retryOnDeadConnection(sql, () => run(event, context), connectionRetried(logger)).finally(flushTraces);
  };
}
