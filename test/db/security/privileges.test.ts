/**
 * The database's privileges are exactly the matrix in ./privileges.ts: every table,
 * sequence, function and schema of the migrated database is listed there, and each role's
 * effective privileges on it are what the matrix says, no more and no fewer. A migration
 * that adds an object without deciding who may use it fails here by the object's name.
 */
import { describe, expect, it } from 'vitest';
import type { DatabaseRole } from '../../../functions/lib/database-roles';
import { settledRoles, useTestDatabase } from '../../helpers/db';
import { CONSUMERS } from '../../../functions/consumers/index';
import {
  CONSUMER_TABLES,
  consumerTables,
  effectiveGrant,
  FUNCTIONS,
  LOGIN,
  MEMBER_OF,
  ROLES,
  SCHEMAS,
  SEQUENCES,
  TABLES,
  type Columns,
  type TableGrant,
} from './privileges';

const db = await useTestDatabase();

/** Every schema but PostgreSQL's own. */
const USER_SCHEMAS = db.sql`n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'`;

const COLUMN_PRIVILEGES = ['select', 'insert', 'update', 'references'] as const;
const TABLE_PRIVILEGES = ['delete', 'truncate', 'trigger'] as const;

interface Relation {
  name: string;
  columns: string[];
}

async function relations(): Promise<Relation[]> {
  return db.sql<Relation[]>`
    select format('%s.%s', n.nspname, c.relname) as name,
           array(select a.attname::text from pg_attribute a
                 where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped order by a.attnum) as columns
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind in ('r', 'p', 'v', 'm', 'f') and ${USER_SCHEMAS}
    order by 1`;
}

/** What `role` may do on `table`, in the matrix's shape (column privileges collapse to `true` when they cover every column). */
async function grantOf(role: DatabaseRole, table: Relation): Promise<TableGrant> {
  const grant: TableGrant = {};
  for (const privilege of COLUMN_PRIVILEGES) {
    const rows = await db.sql<{ column: string }[]>`
      select c as column from unnest(${table.columns}::text[]) with ordinality as t(c, i)
      where has_column_privilege(${role}, ${table.name}::regclass, c, ${privilege.toUpperCase()})
      order by i`;
    const columns = rows.map((r) => r.column);
    if (columns.length === table.columns.length) grant[privilege] = true;
    else if (columns.length > 0) grant[privilege] = columns;
  }
  for (const privilege of TABLE_PRIVILEGES) {
    const [row] = await db.sql<
      { ok: boolean }[]
    >`select has_table_privilege(${role}, ${table.name}::regclass, ${privilege.toUpperCase()}) as ok`;
    if (row!.ok) grant[privilege] = true;
  }
  return grant;
}

/** The matrix's entry with column lists in table order (the database's answer comes in that order). */
function normalized(grant: TableGrant, table: Relation): TableGrant {
  const out: TableGrant = { ...grant };
  for (const privilege of COLUMN_PRIVILEGES) {
    const columns: Columns | undefined = grant[privilege];
    if (columns === undefined || columns === true) continue;
    const unknown = columns.filter((c) => !table.columns.includes(c));
    if (unknown.length > 0) throw new Error(`privileges.ts: ${table.name} has no column(s) ${unknown.join(', ')}`);
    const ordered = table.columns.filter((c) => columns.includes(c));
    out[privilege] = ordered.length === table.columns.length ? true : ordered;
  }
  return out;
}

describe('the privilege matrix (test/db/security/privileges.ts)', () => {
  it('lists every table and view of the database', async () => {
    const names = (await relations()).map((r) => r.name);
    expect({
      missingFromMatrix: names.filter((n) => !(n in TABLES)),
      notInDatabase: Object.keys(TABLES).filter((n) => !names.includes(n)),
    }).toEqual({
      missingFromMatrix: [],
      notInDatabase: [],
    });
  });

  it("gives each role exactly the matrix's privileges on every table", async () => {
    const actual: Record<string, Record<string, TableGrant>> = {};
    const expected: Record<string, Record<string, TableGrant>> = {};
    for (const table of await relations()) {
      actual[table.name] = {};
      expected[table.name] = {};
      for (const role of ROLES) {
        const got = await grantOf(role, table);
        if (Object.keys(got).length > 0) actual[table.name]![role] = got;
        const want = effectiveGrant(table.name, role);
        if (Object.keys(want).length > 0) expected[table.name]![role] = normalized(want, table);
      }
    }
    expect(actual).toEqual(expected);
  });

  it('lists every sequence, with the roles that may use it', async () => {
    const sequences = await db.sql<{ name: string }[]>`
      select format('%s.%s', n.nspname, c.relname) as name
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind = 'S' and ${USER_SCHEMAS} order by 1`;
    const actual: Record<string, Record<string, string[]>> = {};
    for (const { name } of sequences) {
      actual[name] = {};
      for (const role of ROLES) {
        const held: string[] = [];
        for (const privilege of ['USAGE', 'SELECT', 'UPDATE'] as const) {
          const [row] = await db.sql<{ ok: boolean }[]>`select has_sequence_privilege(${role}, ${name}, ${privilege}) as ok`;
          if (row!.ok) held.push(privilege);
        }
        if (held.length > 0) actual[name]![role] = held;
      }
    }
    // The identity and serial sequences of the consumers' own tables: no role needs a grant on them.
    const owned = await db.sql<{ name: string }[]>`
      select format('%s.%s', n.nspname, s.relname) as name
      from pg_depend d join pg_class s on s.oid = d.objid join pg_namespace n on n.oid = s.relnamespace
      join pg_class t on t.oid = d.refobjid join pg_namespace tn on tn.oid = t.relnamespace
      where s.relkind = 'S' and d.deptype in ('a', 'i') and format('%s.%s', tn.nspname, t.relname) = any(${Object.keys(CONSUMER_TABLES)})`;
    const expected = { ...SEQUENCES, ...Object.fromEntries(owned.map(({ name }) => [name, {}])) };
    expect(actual).toEqual(Object.fromEntries(Object.entries(expected).map(([n, roles]) => [n, { ...roles }])));
  });

  it('lists every function and procedure, with the roles that may execute it (none by default: not even PUBLIC)', async () => {
    const functions = await db.sql<{ signature: string; executors: string[] }[]>`
      select p.oid::regprocedure::text as signature,
             array(select r from unnest(${ROLES as DatabaseRole[]}::text[]) as r
                   where has_function_privilege(r, p.oid, 'EXECUTE') order by r) as executors
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where ${USER_SCHEMAS}
        and not exists (select from pg_depend d where d.objid = p.oid and d.deptype = 'e')
      order by 1`;
    expect(Object.fromEntries(functions.map((f) => [f.signature, f.executors]))).toEqual(
      Object.fromEntries(Object.entries(FUNCTIONS).map(([s, roles]) => [s, [...roles].sort()])),
    );
  });

  it("derives the shipped consumers' grants from their declarations: what their handlers need, no more", () => {
    // The example consumers as fixtures: a declaration that changed what it grants changes this.
    const shipped = consumerTables(CONSUMERS.filter((c) => ['case-projection', 'case-sla', 'notification-service'].includes(c.name)));
    expect(shipped).toEqual({
      'case_core.case_audit': { inbox_worker_case_projection: { insert: true }, inbox_worker_case_sla: { insert: true } },
      'read_model.case_summary': { inbox_worker_case_projection: { select: true, insert: true, update: true } },
      'case_core.sla_obligation': {
        inbox_worker_case_sla: { insert: true, select: ['case_id', 'obligation_type', 'due_at', 'source_event_id'] },
      },
      'public.notification_jobs': {
        inbox_ingest_notification_service: { insert: true },
        inbox_worker_notification_service: { insert: true },
      },
    });
  });

  it('lists every schema with the roles that may use it; none may create in any', async () => {
    const schemas = await db.sql<{ name: string; usage: string[]; create: string[] }[]>`
      select n.nspname as name,
             array(select r from unnest(${ROLES as DatabaseRole[]}::text[]) as r
                   where has_schema_privilege(r, n.oid, 'USAGE') order by r) as usage,
             array(select r from unnest(${ROLES as DatabaseRole[]}::text[]) as r
                   where has_schema_privilege(r, n.oid, 'CREATE') order by r) as create
      from pg_namespace n where ${USER_SCHEMAS} order by 1`;
    expect(Object.fromEntries(schemas.map((s) => [s.name, { usage: s.usage, create: s.create }]))).toEqual(
      Object.fromEntries(Object.entries(SCHEMAS).map(([name, roles]) => [name, { usage: [...roles].sort(), create: [] }])),
    );
  });

  it('lets no runtime role own anything, create databases or roles, or bypass row security', async () => {
    const owned = await db.sql<{ object: string }[]>`
      select format('%s %s.%s', c.relkind, n.nspname, c.relname) as object
      from pg_class c join pg_namespace n on n.oid = c.relnamespace join pg_roles r on r.oid = c.relowner
      where r.rolname = any(${ROLES as DatabaseRole[]}::text[])
      union all
      select format('schema %s', n.nspname) from pg_namespace n join pg_roles r on r.oid = n.nspowner
      where r.rolname = any(${ROLES as DatabaseRole[]}::text[])
      union all
      select format('function %s', p.oid::regprocedure) from pg_proc p join pg_roles r on r.oid = p.proowner
      where r.rolname = any(${ROLES as DatabaseRole[]}::text[])`;
    expect(owned).toEqual([]);

    await settledRoles(async () => {
      const roles = await db.sql`
        select rolname, rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls,
               has_database_privilege(rolname, current_database(), 'CREATE') as create_in_database,
               array(select g.rolname::text from pg_auth_members m join pg_roles g on g.oid = m.roleid
                     where m.member = r.oid and g.rolname <> 'rds_iam' order by 1) as member_of
        from pg_roles r where rolname = any(${ROLES as DatabaseRole[]}::text[]) order by rolname`;
      const plain = {
        rolsuper: false,
        rolcreatedb: false,
        rolcreaterole: false,
        rolreplication: false,
        rolbypassrls: false,
        create_in_database: false,
      };
      expect(roles).toEqual(
        [...ROLES].sort().map((rolname) => ({
          rolname,
          rolcanlogin: LOGIN.includes(rolname),
          ...plain,
          member_of: [...(MEMBER_OF[rolname] ?? [])].sort(),
        })),
      );
    });
  });
});
