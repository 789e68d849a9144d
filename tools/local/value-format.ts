/**
 * `npm start -- --value-format avro|protobuf`: the case topic as a registry-backed topic.
 * Its events (first deliveries and duplicates) are re-encoded in the Confluent wire format
 * with the case envelope's Avro or Protobuf schema, served by a small in-process HTTP
 * registry speaking the Confluent REST API; the consumers' ingest functions read them
 * through it as they would in AWS. Poison records stay what they are (their point is to be
 * unreadable), and so does an event the schema cannot carry (the run's contract violations
 * that break the envelope): the topic then mixes formats, which the decoder must handle.
 */
import { confluentFetcher } from '../../functions/wings/decoding/confluent-registry';
import { createSchemaSource, type SchemaSource } from '../../functions/wings/decoding/schema-source';
import { CASE_EVENTS_TOPIC } from '../../functions/consumers/case-projection';
import {
  avroEncoder,
  CASE_AVRO_SCHEMA,
  CASE_PROTO,
  caseEventToAvro,
  caseEventToProto,
  confluentFrame,
  confluentMessageIndexes,
  protobufEncoder,
  startLocalRegistry,
} from '../registry-values';
import type { GeneratedStream } from './generator';

export type ValueFormat = 'json' | 'avro' | 'protobuf';

/** The schema ids the local registry serves. */
const SCHEMA_IDS = { avro: 1, protobuf: 2 } as const;
/** The case envelope is the .proto's second message. */
const CASE_MESSAGE_INDEX = [1];

export function describeValueFormat(format: ValueFormat): string {
  return format === 'json' ? 'JSON' : `${format === 'avro' ? 'Avro' : 'Protobuf'} in the Confluent wire format (local registry)`;
}

export interface LocalRegistry {
  source: SchemaSource;
  /** Records of the case topic re-encoded. */
  encoded: number;
  /** Lookups the registry answered (the containers' caches keep this small). */
  requests: () => number;
  close: () => Promise<void>;
}

/** Re-encode the case topic's events in place and start the registry that serves their schema. */
export async function useValueFormat(stream: GeneratedStream, format: Exclude<ValueFormat, 'json'>): Promise<LocalRegistry> {
  const encode =
    format === 'avro'
      ? (() => {
          const avro = avroEncoder(CASE_AVRO_SCHEMA);
          return (e: Record<string, unknown>) => confluentFrame(SCHEMA_IDS.avro, avro(caseEventToAvro(e)));
        })()
      : (() => {
          const proto = protobufEncoder(CASE_PROTO, 'regulatory.case.v1.CaseEvent');
          return (e: Record<string, unknown>) =>
            confluentFrame(SCHEMA_IDS.protobuf, Buffer.concat([confluentMessageIndexes(CASE_MESSAGE_INDEX), proto(caseEventToProto(e))]));
        })();
  let encoded = 0;
  for (const partition of stream.topics.get(CASE_EVENTS_TOPIC) ?? []) {
    for (const record of partition) {
      if (record.label.kind === 'poison' || record.value === null) continue;
      let bytes: Buffer;
      try {
        bytes = encode(JSON.parse(record.value.toString('utf8')) as Record<string, unknown>);
      } catch {
        continue; // the schema cannot carry it: it stays JSON
      }
      record.value = bytes;
      record.headers = {
        ...record.headers,
        'content-type': format === 'avro' ? 'application/vnd.confluent.avro' : 'application/x-protobuf',
      };
      encoded++;
    }
  }
  const registry = await startLocalRegistry(
    format === 'avro'
      ? [{ id: SCHEMA_IDS.avro, schema: JSON.stringify(CASE_AVRO_SCHEMA) }]
      : [{ id: SCHEMA_IDS.protobuf, schemaType: 'PROTOBUF', schema: CASE_PROTO }],
  );
  return {
    source: createSchemaSource(confluentFetcher({ url: registry.url, timeoutMs: 2_000 })),
    encoded,
    requests: registry.requests,
    close: registry.close,
  };
}
