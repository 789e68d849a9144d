/** The reasons a record becomes a poison row. Stable: alarms, dashboards and runbooks use them. */
export const PoisonCodes = {
  TOMBSTONE: 'TOMBSTONE',
  INVALID_BASE64: 'INVALID_BASE64',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  INVALID_UTF8: 'INVALID_UTF8',
  INVALID_JSON: 'INVALID_JSON',
  NOT_AN_OBJECT: 'NOT_AN_OBJECT',
  ENVELOPE_INVALID: 'ENVELOPE_INVALID',
  /** An event id, aggregate type or aggregate id longer than MAX_ID_BYTES (functions/framework/identifiers.ts). */
  ID_TOO_LONG: 'ID_TOO_LONG',
  UNSTORABLE_VALUE: 'UNSTORABLE_VALUE',
  UNSUPPORTED_SOURCE_FORMAT: 'UNSUPPORTED_SOURCE_FORMAT',
  /** JSON nested deeper than MAX_JSON_DEPTH (before anything else is judged), or a decoded value that would be. */
  JSON_TOO_DEEP: 'JSON_TOO_DEEP',
  /** The registry has no schema with the id (or version id) the value names, or no registry is declared to ask. */
  SCHEMA_NOT_FOUND: 'SCHEMA_NOT_FOUND',
  /** The bytes do not decode with the writer schema they name (or the schema itself does not compile). */
  SCHEMA_MISMATCH: 'SCHEMA_MISMATCH',
  /** A leading byte that is neither JSON nor a Confluent (0x00) or Glue (0x03) header, or a broken header. */
  UNSUPPORTED_FRAMING: 'UNSUPPORTED_FRAMING',
  INGEST_FAILED: 'INGEST_FAILED',
} as const;

export type PoisonCode = (typeof PoisonCodes)[keyof typeof PoisonCodes];
