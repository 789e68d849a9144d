/**
 * `npm run generate-event -- kafka --topic T --values file`: the event an MSK event-source
 * mapping would send for those values, written to stdout (as `sam local generate-event
 * kafka` does), for `npm run invoke -- ingest <consumer> --event …` or a test.
 *
 * Each non-empty line of the values file is one record's value, as its bytes (a JSON
 * envelope, or whatever the consumer's format is; `--values -` reads stdin). Keys, headers,
 * partitions and offsets as the options say; values and keys base64, headers as byte
 * arrays, records grouped under "<topic>-<partition>" in offset order (tools/msk-events.ts).
 *
 * Exit codes: 0 the event was written, 2 the command line or the values file was wrong.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { mskEvent, mskRecord, type KafkaRecord } from '../tools/msk-events';

const USAGE = `usage: npm run generate-event -- kafka --topic T --values FILE [options]

  --values FILE        one record value per line (- reads stdin)
  --topic T            the topic the records come from
  --partition P        every record on partition P (default 0)
  --partitions N       spread the records over N partitions by key (needs --key or --key-field)
  --offset O           the first record's offset (default 0); each partition counts on from it
  --key K              every record's key
  --key-field F        each record's key: field F of its JSON value (dots for nested fields)
  --header NAME=VALUE  a header on every record (repeatable)
  --event-source-arn A the cluster's ARN (a placeholder by default)`;

class UsageError extends Error {}

function fieldOf(value: unknown, path: string): string | undefined {
  let at: unknown = value;
  for (const part of path.split('.')) {
    if (typeof at !== 'object' || at === null) return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return typeof at === 'string' || typeof at === 'number' ? String(at) : undefined;
}

/** A stable partition for a key: the same key, the same partition, every run. */
function partitionOf(key: string, partitions: number): number {
  return createHash('sha256').update(key).digest().readUInt32BE(0) % partitions;
}

function count(name: string, text: string | undefined, fallback: number, min: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new UsageError(`--${name} ${text}: a whole number ≥ ${min}`);
  return n;
}

async function main(argv: string[]): Promise<number> {
  const { values: o, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      topic: { type: 'string' },
      values: { type: 'string' },
      partition: { type: 'string' },
      partitions: { type: 'string' },
      offset: { type: 'string' },
      key: { type: 'string' },
      'key-field': { type: 'string' },
      header: { type: 'string', multiple: true },
      'event-source-arn': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (o.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== 'kafka') throw new UsageError('the one event source is kafka');
  if (o.topic === undefined || o.topic.trim() === '') throw new UsageError('--topic is required');
  if (o.values === undefined) throw new UsageError('--values is required');
  if (o.key !== undefined && o['key-field'] !== undefined) throw new UsageError('--key and --key-field: choose one');
  const partitions = count('partitions', o.partitions, 0, 1);
  if (partitions > 0 && o.partition !== undefined) throw new UsageError('--partition and --partitions: choose one');
  if (partitions > 0 && o.key === undefined && o['key-field'] === undefined)
    throw new UsageError('--partitions spreads by key: give --key or --key-field');
  const fixedPartition = count('partition', o.partition, 0, 0);
  const firstOffset = count('offset', o.offset, 0, 0);
  const headers: Array<[string, string]> = (o.header ?? []).map((pair) => {
    const at = pair.indexOf('=');
    if (at <= 0) throw new UsageError(`--header ${pair}: write NAME=VALUE`);
    return [pair.slice(0, at), pair.slice(at + 1)];
  });

  const text =
    o.values === '-'
      ? await readStdin()
      : await readFile(o.values, 'utf8').catch(() => Promise.reject(new UsageError(`cannot read --values ${o.values}`)));
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) throw new UsageError(`--values ${o.values} holds no value`);
  const nextOffset = new Map<number, number>();
  const records: KafkaRecord[] = lines.map((line, i) => {
    let key = o.key;
    if (o['key-field'] !== undefined) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        throw new UsageError(`line ${i + 1} is not JSON: --key-field needs JSON values`);
      }
      key = fieldOf(parsed, o['key-field']);
      if (key === undefined) throw new UsageError(`line ${i + 1} has no field ${o['key-field']}`);
    }
    const partition = partitions > 0 ? partitionOf(key!, partitions) : fixedPartition;
    const offset = nextOffset.get(partition) ?? firstOffset;
    nextOffset.set(partition, offset + 1);
    return mskRecord({ topic: o.topic!, partition, offset, value: line, ...(key === undefined ? {} : { key }), headers });
  });
  const event = mskEvent(records, o['event-source-arn'] === undefined ? {} : { eventSourceArn: o['event-source-arn'] });
  process.stdout.write(`${JSON.stringify(event, null, 2)}\n`);
  return 0;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof UsageError) && !(error instanceof TypeError)) throw error;
  process.stderr.write(`${error.message}\n\n${USAGE}\n`);
  process.exitCode = 2;
}
