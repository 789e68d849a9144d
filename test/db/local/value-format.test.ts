/**
 * `npm start -- --value-format avro|protobuf`: the case topic's events in the Confluent wire
 * format, read by the real ingest functions through an in-process Confluent REST registry;
 * every invariant check of the run holds and the run says which format ran.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runLocal } from '../../../tools/local';
import { DEFAULT_OPTIONS, type LocalOptions } from '../../../tools/local/options';
import { createTestDatabase } from '../../helpers/db';

const outDir = mkdtempSync(join(tmpdir(), 'inbox-value-format-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

// Short, as the other local-run tests: a small stream with every kind of fault in it.
const SMALL: LocalOptions = {
  ...DEFAULT_OPTIONS,
  events: 300,
  seed: 5,
  poisonRate: 0.03,
  invalidRate: 0.03,
  transientRate: 0.05,
  permanentRate: 0.03,
  infraFailureRate: 0.1,
  redeliveryRate: 0.1,
  crashes: 1,
  batchSize: 40,
  tickMs: 100,
  pauseMs: 1_000,
  timeoutSeconds: 50,
  logLevel: 'SILENT',
};

describe.each([
  ['avro', 'Avro in the Confluent wire format (local registry)'],
  ['protobuf', 'Protobuf in the Confluent wire format (local registry)'],
] as const)('npm start -- --value-format %s', (format, described) => {
  it('passes every check, with the case events read through the registry, and says which format ran', async () => {
    const db = await createTestDatabase();
    try {
      let output = '';
      const result = await runLocal(
        { ...SMALL, valueFormat: format, reportFile: join(outDir, `${format}.html`) },
        { databaseUrl: db.url, out: { write: (t) => void (output += t) } },
      );

      expect(result.checks.filter((c) => !c.ok)).toEqual([]);
      expect(result.exitCode).toBe(0);
      expect(output).toMatch(new RegExp(`Case events: ${described.replace(/[()]/g, '\\$&')}, \\d+ records encoded\\.`));
      expect(output).toContain(`All 15 checks passed`);
      expect(output).toContain(`(case events: ${described}).`);
      // Binary case events became inbox rows: their envelopes were decoded, not poisoned.
      const [{ binaryPoison }] = await db.sql<[{ binaryPoison: number }]>`
        select count(*)::int as "binaryPoison" from integration.consumer_raw_poison
        where error_code in ('SCHEMA_NOT_FOUND', 'SCHEMA_MISMATCH', 'UNSUPPORTED_FRAMING')`;
      expect(binaryPoison).toBe(0);
    } finally {
      await db.drop();
    }
  });
});
