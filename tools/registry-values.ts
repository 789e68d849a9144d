/**
 * The producer's side of a schema-registry topic, for tests, the benchmark and the local
 * run: Avro and Protobuf encoders, the Confluent and Glue wire formats, and a small
 * in-process HTTP registry speaking the Confluent REST API for the schemas it serves.
 *
 *   const avro = avroEncoder(CASE_AVRO_SCHEMA);
 *   const value = confluentFrame(1, avro(producerValue));            // 00 | id | body
 *   const glued = glueFrame(versionId, avro(producerValue), { zlib }); // 03 | 05 | uuid | body
 *
 * Producer values are what the writer schema's underlying types hold: a timestamp-millis
 * is a bigint of milliseconds, a decimal is its two's-complement bytes.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { deflateSync } from 'node:zlib';
import avro from 'avsc';
import protobuf from 'protobufjs';
import { BigIntLong } from '../functions/wings/decoding/avro-schema';

/**
 * An Avro binary encoder for `schema` (no logical types: the producer writes the underlying
 * values). `references`: the schemas whose named types it uses, each before those using it.
 */
export function avroEncoder(schema: object, references: readonly object[] = []): (value: unknown) => Buffer {
  const anyLong = (s: avro.Schema) =>
    s === 'long' || (typeof s === 'object' && s !== null && (s as { type?: unknown }).type === 'long') ? BigIntLong : undefined;
  const options = { typeHook: anyLong as avro.ForSchemaOptions['typeHook'], wrapUnions: 'auto' as const, registry: {} };
  for (const reference of references) avro.Type.forSchema(reference as avro.Schema, options);
  const type = avro.Type.forSchema(schema as avro.Schema, options);
  return (value) => type.toBuffer(value);
}

/** A Protobuf encoder for message `messageName` of the .proto text; `imports`: the other files it imports, by path. */
export function protobufEncoder(
  proto: string,
  messageName: string,
  imports: Readonly<Record<string, string>> = {},
): (value: Record<string, unknown>) => Buffer {
  const root = new protobuf.Root();
  const added = new Set<string>();
  const add = (text: string) => {
    for (const name of protobuf.parse(text, root, { keepCase: true }).imports ?? []) {
      if (added.has(name)) continue;
      added.add(name);
      const own = imports[name];
      if (own !== undefined) add(own);
      else root.addJSON(protobuf.common.get(name)!.nested!);
    }
  };
  add(proto);
  root.resolveAll();
  const type = root.lookupType(messageName);
  return (value) => Buffer.from(type.encode(type.fromObject(value)).finish());
}

/** Two's-complement big-endian bytes of an unscaled decimal (Avro `decimal` on `bytes`). */
export function decimalBytes(unscaled: bigint): Buffer {
  let hex = (unscaled < 0n ? (1n << 128n) + unscaled : unscaled).toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  let bytes = Buffer.from(hex, 'hex');
  if (unscaled < 0n) {
    let start = 0;
    while (start < bytes.length - 1 && bytes[start] === 0xff && (bytes[start + 1]! & 0x80) !== 0) start++;
    bytes = bytes.subarray(start);
  } else if ((bytes[0]! & 0x80) !== 0) {
    bytes = Buffer.concat([Buffer.from([0]), bytes]);
  }
  return bytes;
}

const zigzag = (n: number) => (n >= 0 ? n * 2 : -n * 2 - 1);
function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/** Confluent's Protobuf message indexes: [0] as the single byte 00, else a zigzag count and zigzag indexes. */
export function confluentMessageIndexes(path: readonly number[]): Buffer {
  if (path.length === 1 && path[0] === 0) return Buffer.from([0]);
  return Buffer.from([...varint(zigzag(path.length)), ...path.flatMap((i) => varint(zigzag(i)))]);
}

/** Glue's Protobuf message index: the message's position among the top-level messages, one varint. */
export function glueMessageIndex(index: number): Buffer {
  return Buffer.from(varint(index));
}

/** Confluent wire format: magic byte 0, the schema id as 4 bytes big-endian, the body. */
export function confluentFrame(schemaId: number, body: Uint8Array): Buffer {
  const header = Buffer.alloc(5);
  header.writeUInt32BE(schemaId, 1);
  return Buffer.concat([header, body]);
}

/** Glue wire format: header version 3, compression (0 none, 5 zlib), the schema version id as 16 bytes, the body. */
export function glueFrame(schemaVersionId: string, body: Uint8Array, options: { zlib?: boolean } = {}): Buffer {
  const id = Buffer.from(schemaVersionId.replace(/-/g, ''), 'hex');
  if (id.length !== 16) throw new Error('a Glue schema version id is a UUID');
  return Buffer.concat([Buffer.from([3, options.zlib ? 5 : 0]), id, options.zlib ? deflateSync(body) : body]);
}

/** A schema another one uses, as Confluent lists it: the name it is used by, and the subject version holding it. */
export interface ServedReference {
  name: string;
  subject: string;
  version: number;
}

export interface ServedSchema {
  id: number;
  /** Absent: Avro (as the Confluent API omits it). */
  schemaType?: 'AVRO' | 'PROTOBUF' | 'JSON';
  schema: string;
  references?: readonly ServedReference[];
}

/** A subject's version: the served schema it is. */
export interface ServedSubjectVersion {
  subject: string;
  version: number;
  id: number;
}

export interface LocalRegistryOptions {
  /** The subjects' versions it serves (for schema references). */
  subjects?: readonly ServedSubjectVersion[];
  /** Basic-auth credentials it requires, read at each request (a rotation changes them); none: it requires none. */
  credentials?: () => { username: string; password: string };
}

export interface LocalRegistry {
  url: string;
  /** The lookups it answered (what a container's cache saves). */
  requests: () => number;
  /** Each request's path and the status it was answered with, in order. */
  log: () => { path: string; status: number }[];
  down: () => void;
  up: () => void;
  close: () => Promise<void>;
}

/** What the registry answers for a schema: Confluent's body, schemaType and references only when they apply. */
function answerOf(served: ServedSchema): Record<string, unknown> {
  return {
    schema: served.schema,
    ...(served.schemaType && served.schemaType !== 'AVRO' ? { schemaType: served.schemaType } : {}),
    ...(served.references && served.references.length > 0 ? { references: served.references } : {}),
  };
}

/**
 * A Confluent-REST registry on 127.0.0.1: `GET /schemas/ids/{id}` answers `{ schema,
 * schemaType, references }` and `GET /subjects/{subject}/versions/{version}` the same with
 * the subject, version and id, or 404 `{ error_code: 40403 }`; with `credentials`, a
 * request without them is 401. `down()` makes it answer 503 until `up()`.
 */
export async function startLocalRegistry(schemas: readonly ServedSchema[], options: LocalRegistryOptions = {}): Promise<LocalRegistry> {
  const byId = new Map(schemas.map((s) => [s.id, s]));
  const bySubject = new Map((options.subjects ?? []).map((v) => [`${v.subject}/${v.version}`, v]));
  const log: { path: string; status: number }[] = [];
  let unavailable = false;
  const answer = (res: ServerResponse, path: string, status: number, body: unknown) => {
    log.push({ path, status });
    res.statusCode = status;
    res.end(JSON.stringify(body));
  };
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '';
    res.setHeader('content-type', 'application/vnd.schemaregistry.v1+json');
    if (unavailable) return answer(res, path, 503, { error_code: 50300, message: 'unavailable' });
    if (options.credentials) {
      const { username, password } = options.credentials();
      if (req.headers.authorization !== `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`)
        return answer(res, path, 401, { error_code: 40101, message: 'Unauthorized' });
    }
    const byIdMatch = /^\/schemas\/ids\/(\d+)$/.exec(path);
    const subjectMatch = /^\/subjects\/([^/]+)\/versions\/(\d+)$/.exec(path);
    const version = subjectMatch ? bySubject.get(`${decodeURIComponent(subjectMatch[1]!)}/${subjectMatch[2]}`) : undefined;
    const served = byIdMatch ? byId.get(Number(byIdMatch[1])) : version ? byId.get(version.id) : undefined;
    if (served === undefined) return answer(res, path, 404, { error_code: 40403, message: 'Schema not found' });
    return answer(
      res,
      path,
      200,
      version ? { subject: version.subject, version: version.version, id: version.id, ...answerOf(served) } : answerOf(served),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => log.length,
    log: () => [...log],
    down: () => {
      unavailable = true;
    },
    up: () => {
      unavailable = false;
    },
    close: () => new Promise<void>((resolve, reject) => server.close((e) => (e ? reject(e) : resolve()))),
  };
}

// ---- The reference consumers' envelopes as registry schemas -------------------------------

/** The canonical case envelope (case-projection, case-sla) as an Avro record. */
export const CASE_AVRO_SCHEMA = {
  type: 'record',
  name: 'CaseEvent',
  namespace: 'regulatory.case.v1',
  fields: [
    { name: 'eventId', type: 'string' },
    { name: 'eventType', type: 'string' },
    { name: 'eventVersion', type: 'int' },
    { name: 'occurredAt', type: { type: 'long', logicalType: 'timestamp-micros' } },
    { name: 'producer', type: 'string' },
    { name: 'correlationId', type: ['null', 'string'], default: null },
    { name: 'causationId', type: ['null', 'string'], default: null },
    { name: 'aggregateType', type: 'string' },
    { name: 'aggregateId', type: 'string' },
    { name: 'partitionKey', type: ['null', 'string'], default: null },
    { name: 'aggregateVersion', type: ['null', 'long'], default: null },
    {
      name: 'payload',
      type: {
        type: 'record',
        name: 'CasePayload',
        fields: [
          { name: 'caseId', type: 'string' },
          { name: 'acceptedAt', type: ['null', { type: 'long', logicalType: 'timestamp-millis' }], default: null },
          { name: 'newStatus', type: ['null', 'string'], default: null },
        ],
      },
    },
  ],
};

/** The canonical case envelope as a .proto; the envelope is the file's second message (index 1). */
export const CASE_PROTO = `syntax = "proto3";
package regulatory.case.v1;
import "google/protobuf/timestamp.proto";

message TraceContext {
  string traceparent = 1;
}

message CaseEvent {
  string eventId = 1;
  string eventType = 2;
  int32 eventVersion = 3;
  google.protobuf.Timestamp occurredAt = 4;
  string producer = 5;
  optional string correlationId = 6;
  string aggregateType = 7;
  string aggregateId = 8;
  optional string partitionKey = 9;
  optional int64 aggregateVersion = 10;
  CasePayload payload = 11;
  optional string causationId = 12;
}

message CasePayload {
  string caseId = 1;
  google.protobuf.Timestamp acceptedAt = 2;
  optional string newStatus = 3;
}
`;

/** A canonical case event (as the local run's generator builds it) in the Avro schema's underlying values. */
export function caseEventToAvro(e: Record<string, unknown>): Record<string, unknown> {
  const p = (e.payload ?? {}) as Record<string, unknown>;
  const micros = (iso: unknown) => BigInt(Date.parse(String(iso))) * 1000n;
  return {
    eventId: e.eventId,
    eventType: e.eventType,
    eventVersion: e.eventVersion,
    occurredAt: micros(e.occurredAt),
    producer: e.producer,
    correlationId: e.correlationId ?? null,
    causationId: e.causationId ?? null,
    aggregateType: e.aggregateType,
    aggregateId: e.aggregateId,
    partitionKey: e.partitionKey ?? null,
    aggregateVersion: e.aggregateVersion === undefined || e.aggregateVersion === null ? null : BigInt(e.aggregateVersion as number),
    payload: {
      caseId: p.caseId,
      acceptedAt: p.acceptedAt === undefined ? null : BigInt(Date.parse(String(p.acceptedAt))),
      newStatus: p.newStatus ?? null,
    },
  };
}

/** The same event as the .proto's object (protobufjs fromObject). */
export function caseEventToProto(e: Record<string, unknown>): Record<string, unknown> {
  const p = (e.payload ?? {}) as Record<string, unknown>;
  const ts = (iso: unknown) => {
    const ms = Date.parse(String(iso));
    return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
  };
  return {
    eventId: e.eventId,
    eventType: e.eventType,
    eventVersion: e.eventVersion,
    occurredAt: ts(e.occurredAt),
    producer: e.producer,
    ...(e.correlationId != null ? { correlationId: e.correlationId } : {}),
    ...(e.causationId != null ? { causationId: e.causationId } : {}),
    aggregateType: e.aggregateType,
    aggregateId: e.aggregateId,
    ...(e.partitionKey != null ? { partitionKey: e.partitionKey } : {}),
    ...(e.aggregateVersion != null ? { aggregateVersion: e.aggregateVersion } : {}),
    payload: {
      caseId: p.caseId,
      ...(p.acceptedAt !== undefined ? { acceptedAt: ts(p.acceptedAt) } : {}),
      ...(p.newStatus != null ? { newStatus: p.newStatus } : {}),
    },
  };
}
