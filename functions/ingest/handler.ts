/**
 * The ingest Lambda: an MSK event-source mapping's batch → the inbox (docs/design.md §8).
 * Thin on purpose: the logic is createIngest() in ./ingest.ts, which tests, benchmarks and
 * the local simulator call with their own database and no environment. Each consumer's
 * function is bundled from an entry that passes its own declaration (cdk/function-entries.ts):
 * no other team's module is in its bundle.
 */
import type { Context } from 'aws-lambda';
import type { ConsumerDeclaration } from '../framework/types';
import { DEFAULTS, loadConfig, requireOwnConsumer } from '../lib/config';
import { beginInvocation, getSql } from '../lib/db';
import { classifyError, serverSafe } from '../lib/errors';
import { MetricNames } from '../lib/metric-names';
import { count, createObservability } from '../lib/observability';
import { flushTraces, startTracing } from '../lib/tracing';
import { schemaRegistrySchema } from '../framework/schema-registry';
import { createIngestHandler, failEveryPartition, type WorkerWakeUp } from './ingest';
import type { KafkaBatchResponse, KafkaEvent } from './types';
// The handler plugs the wings into the core: the core imports none (docs/development.md).
import { binaryValues } from '../wings/decoding/binary-values';
import { createSchemaSource, registryFetcher } from '../wings/decoding/schema-source';
import { wakeUpClient } from '../wings/wake-ups/wake-up';
import { wakeUpsTo } from '../wings/wake-ups/wake-worker';

export type IngestLambda = (event: KafkaEvent, context: Context) => Promise<KafkaBatchResponse>;

/** The Lambda handler of `consumer`'s ingest function, configured from the environment. */
export async function ingestLambda(consumer: ConsumerDeclaration): Promise<IngestLambda> {
  const config = loadConfig();
  requireOwnConsumer(config, consumer);
  const { logger, metrics } = createObservability(config, 'ingest');
  // The SDK loads only when OTEL_TRACES_EXPORTER asks for spans (lib/tracing.ts).
  await startTracing(config.tracing, { serviceName: config.observability.serviceName });
  // The consumer's worker, woken when a batch leaves it rows and nobody is awake to see them.
  const wakeUp: WorkerWakeUp | undefined =
    config.wakeUps.enabled && config.wakeUps.workerFunctionName !== undefined
      ? wakeUpsTo({ lambda: wakeUpClient(), functionName: config.wakeUps.workerFunctionName })
      : undefined;

  // The stage's registry (SCHEMA_REGISTRY), else the declaration's: parsed at cold start, so a
  // malformed one fails the function's start rather than a batch.
  const registry =
    config.schemaRegistry !== undefined ? schemaRegistrySchema.parse(config.schemaRegistry.declaration) : consumer.schemaRegistry;
  // Its client loads with the first value that names a schema: a JSON consumer never loads it.
  const schemaSource =
    registry === undefined
      ? undefined
      : createSchemaSource(
          registryFetcher(schemaRegistrySchema.parse(registry), {
            timeoutMs: config.schemaRegistry?.timeoutMs ?? DEFAULTS.schemaRegistryTimeoutMs,
            secretMaxAgeMs: (config.schemaRegistry?.secretMaxAgeSeconds ?? DEFAULTS.schemaRegistrySecretMaxAgeSeconds) * 1000,
          }),
        );

  // Every consumer's: a value framed for a registry is told apart from JSON even where none is declared.
  const valueDecoder = binaryValues(consumer, schemaSource);

  let ingest: ReturnType<typeof createIngestHandler> | undefined;

  return async function handler(event: KafkaEvent, context: Context): Promise<KafkaBatchResponse> {
    logger.addContext(context);
    try {
      if (ingest === undefined) {
        let sql;
        try {
          sql = await getSql(config.database);
          await beginInvocation(sql, context);
        } catch (error) {
          // No client (e.g. no IAM token could be signed): nothing was stored, redeliver it all.
          const response = { batchItemFailures: failEveryPartition(event) };
          logger.error('no database client', { ...serverSafe(classifyError(error)), batchItemFailures: response.batchItemFailures.length });
          count(metrics, MetricNames.BatchItemFailures, response.batchItemFailures.length);
          return response;
        }
        ingest = createIngestHandler({
          sql,
          consumer,
          config,
          logger,
          metrics,
          ...(wakeUp ? { wakeUp } : {}),
          valueDecoder,
        });
      } else {
        await beginInvocation(await getSql(config.database), context);
      }
      return await ingest(event, context);
    } finally {
      // Lambda freezes the process after returning: flush now or lose the batch's metrics and spans.
      metrics.publishStoredMetrics();
      await flushTraces();
    }
  };
}
