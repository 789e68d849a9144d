/**
 * Worker function: drains the due rows of one consumer within the invocation's time
 * budget. Invoked by EventBridge Scheduler (rate(1 minute)), by its consumer's ingest
 * function when rows arrive and nobody is awake, and by its own invocations fanning out or
 * handing over. The core's loop is run-worker.ts; the invocation around it (slots, the
 * gate, fan-out, hand-over) is the wake-ups wing's (functions/wings/wake-ups/invocation.ts).
 * Each consumer's function is bundled from an entry that passes its own declaration
 * (cdk/function-entries.ts): no other team's module is in its bundle.
 */
import type { Context } from 'aws-lambda';
import type { ConsumerDeclaration } from '../framework/types';
import { loadConfig, requireOwnConsumer } from '../lib/config';
import { beginInvocation, getSql, retryOnDeadConnection } from '../lib/db';
import { connectionRetried, createObservability } from '../lib/observability';
import { flushTraces, startTracing } from '../lib/tracing';
// The handler plugs the wings into the core: the core imports none (docs/development.md).
import { createWorkerInvocation, type InvocationResult } from '../wings/wake-ups/invocation';
import { wakeUpClient } from '../wings/wake-ups/wake-up';

export type WorkerLambda = (event: unknown, context: Context) => Promise<InvocationResult>;

/** The Lambda handler of `consumer`'s worker function, configured from the environment. */
export async function workerLambda(consumer: ConsumerDeclaration): Promise<WorkerLambda> {
  const config = loadConfig();
  requireOwnConsumer(config, consumer);
  const { logger, metrics } = createObservability(config, 'worker');
  // The SDK loads only when OTEL_TRACES_EXPORTER asks for spans (lib/tracing.ts).
  await startTracing(config.tracing, { serviceName: config.observability.serviceName });
  // Lambda names the function it runs: the target of this worker's fan-out and hand-over.
  const functionName = config.wakeUps.functionName;

  let invoke: ReturnType<typeof createWorkerInvocation> | undefined;

  return async function handler(event, context) {
    logger.addContext(context);
    try {
      const sql = await getSql(config.database);
      await beginInvocation(sql, context);
      const run = (invoke ??= createWorkerInvocation({
        sql,
        consumer,
        config,
        logger,
        metrics,
        ...(functionName !== undefined ? { self: { lambda: wakeUpClient(), functionName } } : {}),
      }));
      const result = await retryOnDeadConnection(sql, () => run(event, context), connectionRetried(logger));
      // An invocation that found nothing to do (the schedule's, on an idle consumer) is told at DEBUG only.
      if (result.claimed > 0 || result.fannedOut > 0 || result.handedOver) logger.info('worker_finished', { ...result });
      else logger.debug('worker_finished', { ...result });
      return result;
    } finally {
      // An invocation that found nothing to do has nothing to publish (and no empty document to warn of).
      if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
      // Lambda freezes the process after returning: the invocation's spans go now or never.
      await flushTraces();
    }
  };
}
