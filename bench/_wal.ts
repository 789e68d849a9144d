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
  /** By WAL record type ("Heap/INSERT", "Btree/INSERT_LEAF" …), largest first. */
  byType: { type: string; count: number; bytes: number; fpiBytes: number }[];
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
      const byType = await admin<{ type: string; count: string; bytes: string; fpi: string }[]>`
        select "resource_manager/record_type" as type, sum(count)::text as count,
               sum(combined_size)::text as bytes, sum(fpi_size)::text as fpi
        from pg_get_wal_stats(${start!.lsn}::pg_lsn, ${end!.lsn}::pg_lsn, true)
        where count > 0
        group by 1 order by sum(combined_size) desc`;
      return {
        wal: {
          bytes: Number(stats!.bytes),
          fpiBytes: Number(stats!.fpi),
          records: Number(stats!.records),
          byType: byType.map((t) => ({ type: t.type, count: Number(t.count), bytes: Number(t.bytes), fpiBytes: Number(t.fpi) })),
        },
        result,
      };
    },
  };
}

/** "1,234 B/event (fpi 456)" */
export function perEvent(wal: Wal, events: number): string {
  const b = Math.round(wal.bytes / events);
  const f = Math.round(wal.fpiBytes / events);
  return `${b.toLocaleString('en-US').padStart(7)} B/event (FPI ${f.toLocaleString('en-US').padStart(5)})`;
}

/** The record types that make up at least `share` of a phase, per event: "Heap/HOT_UPDATE 1.00 × 310 B (FPI 12)". */
export function byTypePerEvent(wal: Wal, events: number, share = 0.02): string[] {
  return wal.byType
    .filter((t) => t.bytes >= wal.bytes * share)
    .map(
      (t) =>
        `${t.type.padEnd(26)} ${(t.count / events).toFixed(2).padStart(5)} rec  ${Math.round(t.bytes / events)
          .toLocaleString('en-US')
          .padStart(6)} B (FPI ${Math.round(t.fpiBytes / events).toLocaleString('en-US')})`,
    );
}
