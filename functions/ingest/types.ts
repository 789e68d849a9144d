/**
 * The event an MSK (or self-managed Kafka) event-source mapping sends, and the partial
 * batch response it reads back.
 *
 * Wider than @types/aws-lambda's MSKEvent on purpose: a tombstone arrives without a value,
 * a record may have no key or headers, and a record the ESM cannot frame must still be
 * handled rather than crash the batch. AWS's MSKEvent is assignable to this type.
 */
export interface KafkaRecord {
  topic: string;
  partition: number;
  offset: number;
  /** Milliseconds since the epoch. */
  timestamp?: number;
  timestampType?: string;
  /** base64 of the key's bytes; absent for a record without a key. */
  key?: string | null;
  /** base64 of the value's bytes; absent, null or empty for a tombstone. */
  value?: string | null;
  /** One object per header, `{ name: [byte, byte, …] }`, in the record's order. */
  headers?: Array<Record<string, number[]>>;
  /**
   * Present when the mapping validated the key or value against a schema registry
   * (SchemaRegistryConfig, KEY/VALUE): the schema's format and id. The format is the
   * producer's (AVRO, PROTOBUF, JSON) in both record formats: with EventRecordFormat JSON
   * the attribute itself arrives as base64 of JSON text, with SOURCE as base64 of the
   * producer's bytes without the registry's framing.
   */
  keySchemaMetadata?: SchemaMetadata;
  valueSchemaMetadata?: SchemaMetadata;
}

/** As the mapping sends it; read defensively (a field may be missing or of another type). */
export interface SchemaMetadata {
  dataFormat?: string;
  schemaId?: string;
}

export interface KafkaEvent {
  eventSource?: string;
  eventSourceArn?: string;
  bootstrapServers?: string;
  /** Keyed "<topic>-<partition>"; each list in offset order. */
  records: Record<string, KafkaRecord[]>;
}

/** The format AWS documents for Kafka event sources: an object, not a string. */
export interface BatchItemFailure {
  itemIdentifier: { partition: string; offset: number };
}

export interface KafkaBatchResponse {
  batchItemFailures: BatchItemFailure[];
}
