/**
 * The outbox relay Lambda, fired every minute by EventBridge Scheduler: publishes the
 * outbox's unpublished events to Kafka (MSK, IAM auth) in order per aggregate, draining in
 * a loop within the invocation, then publishes the outbox gauges and applies retention.
 * One function per emitting consumer, CONSUMER_NAME saying which (as ingest and worker):
 * it connects as that consumer's relay role and publishes that consumer's events only.
 * It runs no consumer code: its bundle carries that consumer's manifest entry (names,
 * emitted types, retention; functions/framework/manifest.ts), nothing of any handler.
 * The work is in ./run-relay.ts.
 */
import type { Context } from 'aws-lambda';
import type { ConsumerManifestEntry } from '../framework/manifest';
import { emitsEvents } from '../framework/types';
import { ConfigError, loadConfig, requireKafka, requireOwnConsumer } from '../lib/config';
import { beginInvocation, getSql, retryOnDeadConnection } from '../lib/db';
import { connectionRetried, createObservability } from '../lib/observability';
import { flushTraces, startTracing } from '../lib/tracing';
import { createMskProducer } from './kafka-producer';
import { newRelayOwnerId, runRelay, type RelayResult } from './run-relay';

export type RelayLambda = (event: unknown, context: Context) => Promise<Omit<RelayResult, 'gauges'>>;

/** The Lambda handler of the relay of `consumer` (its manifest entry), configured from the environment. */
export async function relayLambda(consumer: ConsumerManifestEntry): Promise<RelayLambda> {
  const config = loadConfig();
  const kafka = requireKafka(config);
  requireOwnConsumer(config, consumer);
  if (!emitsEvents(consumer)) throw new ConfigError(`Invalid configuration: CONSUMER_NAME: consumer "${consumer.name}" emits no events`);
  const { logger, metrics } = createObservability(config, 'relay');
  // The SDK loads only when OTEL_TRACES_EXPORTER asks for spans (lib/tracing.ts).
  await startTracing(config.tracing, { serviceName: config.observability.serviceName });
  // One producer per container, connected on first use: its idempotent producer id lives as
  // long as the container does, or until a send fails (kafka-producer.ts says why).
  const producer = createMskProducer(kafka);

  return async function handler(_event, context) {
    logger.addContext(context);
    const sql = await getSql(config.database);
    await beginInvocation(sql, context);
    const { gauges: _gauges, ...result } = await retryOnDeadConnection(
      sql,
      () =>
        runRelay({
          sql,
          producer,
          consumer,
          config,
          logger,
          metrics,
          // The suffix keeps the owner unique when Lambda retries an invocation under the same request id.
          owner: newRelayOwnerId(`relay:${context.awsRequestId}`),
          remainingMs: () => context.getRemainingTimeInMillis(),
        }),
      connectionRetried(logger),
    ).finally(flushTraces);
    // A run that found nothing to publish or purge (an idle consumer's, every minute) is told at DEBUG only.
    if (result.claimed > 0 || result.purged > 0) logger.info('relay_finished', { ...result });
    else logger.debug('relay_finished', { ...result });
    return result;
  };
}
