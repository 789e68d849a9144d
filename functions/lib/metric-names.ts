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
  // processing (worker, and ingest in inline mode)
  EventsProcessed: 'EventsProcessed',
  EventsRetried: 'EventsRetried',
  EventsQuarantined: 'EventsQuarantined',
  EventsIgnored: 'EventsIgnored',
  ProcessingLatency: 'ProcessingLatency',
  // reaper gauges
  DueDepth: 'DueDepth',
  OldestDueAgeSeconds: 'OldestDueAgeSeconds',
  QuarantineDepth: 'QuarantineDepth',
  /** Rows queued behind a QUARANTINED row of their aggregate (quarantine policy hold-aggregate). */
  HeldDepth: 'HeldDepth',
  PoisonLastHour: 'PoisonLastHour',
  StaleLeasesReleased: 'StaleLeasesReleased',
  RowsPurged: 'RowsPurged',
  PayloadsPurged: 'PayloadsPurged',
  // outbox relay (dimension: the emitting consumer)
  OutboxEventsPublished: 'OutboxEventsPublished',
  OutboxPublishRefused: 'OutboxPublishRefused',
  OutboxDepth: 'OutboxDepth',
  OutboxOldestUnpublishedAgeSeconds: 'OutboxOldestUnpublishedAgeSeconds',
  OutboxRowsPurged: 'OutboxRowsPurged',
} as const;

export type MetricName = (typeof MetricNames)[keyof typeof MetricNames];
