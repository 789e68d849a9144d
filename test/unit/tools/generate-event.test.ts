/** `npm run generate-event` as a process: the MSK event it writes, and its exit codes. */
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { KafkaEvent } from '../../../functions/ingest/types';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../../', import.meta.url));

async function generate(args: string[], values?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'generate-'));
  const file = join(dir, 'values.jsonl');
  if (values !== undefined) await writeFile(file, values);
  const argv = args.map((a) => (a === '<values>' ? file : a));
  try {
    const { stdout, stderr } = await run('npm', ['run', '--silent', 'generate-event', '--', ...argv], { cwd: root });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const decode = (b64: string | null | undefined) => Buffer.from(b64 ?? '', 'base64').toString('utf8');

describe('npm run generate-event', () => {
  it('writes an MSK event: each line a record, keyed by a field, spread over partitions by key, offsets per partition', async () => {
    const lines = [
      '{"eventId":"e1","aggregateId":"case-1"}',
      '{"eventId":"e2","aggregateId":"case-2"}',
      '{"eventId":"e3","aggregateId":"case-1"}',
    ];
    const result = await generate(
      [
        'kafka',
        '--topic',
        'orders.v1',
        '--values',
        '<values>',
        '--partitions',
        '4',
        '--key-field',
        'aggregateId',
        '--offset',
        '100',
        '--header',
        'producer=shop',
      ],
      `${lines.join('\n')}\n\n`,
    );

    expect(result.code).toBe(0);
    const event = JSON.parse(result.stdout) as KafkaEvent;
    expect(event.eventSource).toBe('aws:kafka');
    const records = Object.entries(event.records).flatMap(([group, list]) => list.map((r) => ({ group, ...r })));
    expect(records.map((r) => decode(r.value)).sort()).toEqual([...lines].sort());
    const byKey = (key: string) => records.filter((r) => decode(r.key) === key);
    // One key, one partition, its records in line order; each partition counts on from --offset.
    expect(new Set(byKey('case-1').map((r) => r.group)).size).toBe(1);
    expect(byKey('case-1').map((r) => decode(r.value))).toEqual([lines[0], lines[2]]);
    for (const list of Object.values(event.records)) expect(list.map((r) => r.offset)).toEqual(list.map((_, i) => 100 + i));
    for (const r of records) {
      expect(r.group).toBe(`orders.v1-${r.partition}`);
      expect(r.partition).toBeLessThan(4);
      expect(r.topic).toBe('orders.v1');
      expect(r.headers).toEqual([{ producer: [...Buffer.from('shop')] }]);
    }
  });

  it('takes a fixed key and partition', async () => {
    const result = await generate(['kafka', '--topic', 't', '--values', '<values>', '--partition', '2', '--key', 'k'], 'not json at all\n');
    expect(result.code).toBe(0);
    const event = JSON.parse(result.stdout) as KafkaEvent;
    expect(Object.keys(event.records)).toEqual(['t-2']);
    expect(event.records['t-2']!.map((r) => [decode(r.key), decode(r.value), r.offset])).toEqual([['k', 'not json at all', 0]]);
  });

  it.each([
    [['kafka', '--values', '<values>'], '--topic is required'],
    [['sqs', '--topic', 't', '--values', '<values>'], 'the one event source is kafka'],
    [['kafka', '--topic', 't', '--values', '<values>', '--partitions', '3'], '--partitions spreads by key'],
    [['kafka', '--topic', 't', '--values', '<values>', '--key-field', 'id'], 'line 1 is not JSON'],
    [['kafka', '--topic', 't', '--values', '<values>', '--bogus'], "Unknown option '--bogus'"],
  ])('exits 2 on %j, saying why', async (args, message) => {
    const result = await generate(args, 'plain\n');
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(message);
  });
});
