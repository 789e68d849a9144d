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
import { createTestDatabase } from '../../helpers/db';
import { smallRun } from './small-run';

const outDir = mkdtempSync(join(tmpdir(), 'inbox-value-format-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

const SMALL = smallRun({ seed: 5, pauseMs: 1_000 });

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
