/**
 * Every metric the functions emit, by name. The CDK dashboard and alarms import this
 * module too, so the dashboard can never chart a metric that nobody emits.
 * All metrics carry the dimension `ConsumerName`.
 */
export const METRIC_DIMENSION = 'ConsumerName';

export const MetricNames = {
  // ingest
  RecordsReceived: 'RecordsReceived',
  RecordsInserted: 'RecordsInserted',
  RecordsDuplicate: 'RecordsDuplicate',
  RecordsPoisoned: 'RecordsPoisoned',
  BatchItemFailures: 'BatchItemFailures',
  /** Records handed back for redelivery because their writer schema could not be read from the registry. */
  SchemaRegistryUnavailable: 'SchemaRegistryUnavailable',
  // processing (worker, and ingest in inline mode)
  EventsProcessed: 'EventsProcessed',
  EventsRetried: 'EventsRetried',
  EventsQuarantined: 'EventsQuarantined',
  EventsIgnored: 'EventsIgnored',
  ProcessingLatency: 'ProcessingLatency',
  /** Rows quarantined DB_PERMISSION: the consumer's role lacks a grant its handler needs. */
  PermissionDenied: 'PermissionDenied',
  // wake-ups (docs/worker.md, "Wake-ups"): invocations of a consumer's worker sent by its
  // ingest, and by its workers fanning out or handing over at the end of their budget
  WakeUpsSent: 'WakeUpsSent',
  FanOutsSent: 'FanOutsSent',
  HandOversSent: 'HandOversSent',
  /** A wake-up that could not be sent (gate or Lambda API error); the schedule still runs the worker. */
  WakeUpFailures: 'WakeUpFailures',
  // reaper gauges
  DueDepth: 'DueDepth',
  OldestDueAgeSeconds: 'OldestDueAgeSeconds',
  QuarantineDepth: 'QuarantineDepth',
  /** Rows queued behind a QUARANTINED row of their aggregate (quarantine policy hold-aggregate). */
  HeldDepth: 'HeldDepth',
  PoisonLastHour: 'PoisonLastHour',
  /** 1 while the consumer's processing is paused (ops pause), else 0: its silence is deliberate. */
  ConsumerPaused: 'ConsumerPaused',
  StaleLeasesReleased: 'StaleLeasesReleased',
  RowsPurged: 'RowsPurged',
  PayloadsPurged: 'PayloadsPurged',
  /** Sessions of the consumer's roles the reaper ended: a transaction past the bound (docs/reaper.md). */
  ConsumerSessionsEnded: 'ConsumerSessionsEnded',
  // outbox relay (dimension: the emitting consumer)
  OutboxEventsPublished: 'OutboxEventsPublished',
  OutboxPublishRefused: 'OutboxPublishRefused',
  OutboxDepth: 'OutboxDepth',
  OutboxOldestUnpublishedAgeSeconds: 'OutboxOldestUnpublishedAgeSeconds',
  OutboxRowsPurged: 'OutboxRowsPurged',
} as const;

export type MetricName = (typeof MetricNames)[keyof typeof MetricNames];

/**
 * Published only when not zero (observability.ts, `measure`): counts and gauges of what goes
 * wrong or happens rarely. CloudWatch bills a custom metric (a name and its dimensions) for
 * every hour it receives a value, so each zero published per consumer every minute was a
 * metric billed for nothing; a period without a value is no point on the dashboard, and
 * nothing for an alarm that treats missing data as not breaching (all of these). What an
 * alarm must hear even at zero (the backlog gauges, the outbox's oldest age, the pause) and
 * the traffic counts stay published always.
 */
export const PUBLISHED_WHEN_NOT_ZERO: ReadonlySet<MetricName> = new Set<MetricName>([
  MetricNames.RecordsDuplicate,
  MetricNames.RecordsPoisoned,
  MetricNames.BatchItemFailures,
  MetricNames.SchemaRegistryUnavailable,
  MetricNames.EventsRetried,
  MetricNames.EventsQuarantined,
  MetricNames.PermissionDenied,
  MetricNames.EventsIgnored,
  MetricNames.WakeUpFailures,
  MetricNames.HeldDepth,
  MetricNames.PoisonLastHour,
  MetricNames.StaleLeasesReleased,
  MetricNames.RowsPurged,
  MetricNames.PayloadsPurged,
  MetricNames.ConsumerSessionsEnded,
  MetricNames.OutboxPublishRefused,
  MetricNames.OutboxRowsPurged,
]);
