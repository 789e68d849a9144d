/**
 * Every setting's named default: what the configuration (config.ts, which exports them)
 * takes when a variable is unset, and what a caller without a configuration assumes.
 */
export const DEFAULTS = {
  dbPoolMax: 4,
  /** Above the one-minute schedules (a container invoked every minute keeps its connection), below the roles' idle_session_timeout. */
  dbIdleTimeoutSeconds: 120,
  dbConnectTimeoutSeconds: 5,
  /** The client's bound on a statement's answer: the longest role statement_timeout (30 s) and a grace (session-settings.ts). */
  dbQueryTimeoutMs: 32_000,
  maxPayloadBytes: 256 * 1024,
  /** Deepest nesting of objects and arrays a record's value may have (docs/ingest.md, step 3). */
  maxJsonDepth: 64,
  /** One schema-registry request, at most; past it the lookup counts as the registry being unavailable. */
  schemaRegistryTimeoutMs: 3_000,
  /**
   * A Confluent registry's credentials are read from their secret again after this long
   * (and at once when the registry refuses them), so a rotated secret is picked up.
   */
  schemaRegistrySecretMaxAgeSeconds: 300,
  workerBatchSize: 100,
  workerRunLength: 20,
  workerSafetyMarginMs: 10_000,
  /** An awake worker keeps looking for new rows this long after the last it found (docs/worker.md, "Wake-ups"). */
  workerIdleMs: 10_000,
  /** …looking again this often while there are none. */
  workerPollMs: 250,
  /** Workers of one consumer awake at once, at most (its slots). */
  workerMaxConcurrency: 4,
  /** A worker wakes more when the due backlog would take it alone longer than this to drain. */
  workerFanOutDrainSeconds: 5,
  leaseSeconds: 300,
  reaperBatchSize: 1_000,
  reaperSafetyMarginMs: 10_000,
  /**
   * A consumer role's transaction (or statement) running longer than this is ended by the
   * reaper (docs/reaper.md, "Sessions past the bound"): Lambda's longest invocation, so above
   * every function's timeout and statement timeouts.
   */
  consumerSessionBoundSeconds: 900,
  relayBatchSize: 200,
  relayRunLength: 50,
  relaySafetyMarginMs: 10_000,
  relayPurgeBatchSize: 1_000,
  /** Delay before the next try after the broker refused an aggregate's head, by attempt; the last repeats. */
  relayBackoffSeconds: [1, 5, 15, 60, 300] as readonly number[],
  kafkaClientId: 'kafka-inbox-relay',
  kafkaConnectionTimeoutMs: 3_000,
  // One send, retries included, stays well inside the relay's deployed safety margin (30 s).
  kafkaRequestTimeoutMs: 5_000,
  kafkaRetries: 2,
  metricsNamespace: 'KafkaInbox',
  serviceName: 'kafka-inbox',
} as const;
