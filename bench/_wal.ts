/**
 * WAL written by one phase of work: a CHECKPOINT first (so every phase pays its full-page
 * images the same way: the first change of each page after a checkpoint logs the whole
 * page), then the distance between the WAL insert positions around it, split by
 * pg_walinspect into record bytes and full-page-image bytes.
 *
 * The figure is the server's, not the phase's: nothing else may write on the server while
 * a phase runs (benchmarks start their own embedded server, autovacuum off).
 */
import type { Sql } from '../functions/lib/db';

export interface Wal {
  /** All WAL bytes of the phase. */
  bytes: number;
  /** Of which full-page images. */
  fpiBytes: number;
  records: number;
}

export interface WalMeter {
  measure<T>(phase: () => Promise<T>): Promise<{ wal: Wal; result: T }>;
}

export async function walMeter(admin: Sql): Promise<WalMeter> {
  await admin`create extension if not exists pg_walinspect`;
  return {
    async measure(phase) {
      await admin`checkpoint`;
      const [start] = await admin<{ lsn: string }[]>`select pg_current_wal_insert_lsn()::text as lsn`;
      const result = await phase();
      const [end] = await admin<{ lsn: string }[]>`select pg_current_wal_insert_lsn()::text as lsn`;
      // pg_walinspect reads only flushed WAL.
      await admin`select pg_switch_wal()`;
      const [stats] = await admin<{ bytes: string; fpi: string; records: string }[]>`
        select coalesce(sum(combined_size), 0)::text as bytes, coalesce(sum(fpi_size), 0)::text as fpi,
               coalesce(sum(count), 0)::text as records
        from pg_get_wal_stats(${start!.lsn}::pg_lsn, ${end!.lsn}::pg_lsn, false)`;
      return { wal: { bytes: Number(stats!.bytes), fpiBytes: Number(stats!.fpi), records: Number(stats!.records) }, result };
    },
  };
}

/** "1,234 B/event (fpi 456)" */
export function perEvent(wal: Wal, events: number): string {
  const b = Math.round(wal.bytes / events);
  const f = Math.round(wal.fpiBytes / events);
  return `${b.toLocaleString('en-US').padStart(7)} B/event (FPI ${f.toLocaleString('en-US').padStart(5)})`;
}
