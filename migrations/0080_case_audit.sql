-- The case consumers' domain audit (the case inbox design's "insert domain audit"): one row per effect
-- a handler applied, written in the transaction that applies the effect and records the
-- inbox row's status (functions/consumers/case-audit.ts). A stale duplicate or an ignored
-- event changes nothing and writes nothing; an attempt that fails rolls its rows back with
-- its effects.

create table case_core.case_audit (
    audit_id         bigint generated always as identity primary key,
    case_id          text not null,
    -- The consumer that applied the effect, and the inbox event that caused it.
    consumer_name    text not null,
    source_event_id  text not null,
    -- What changed, e.g. CASE_ACCEPTED, CASE_STATUS_CHANGED, SLA_OBLIGATION_OPENED.
    change           text not null,
    -- The state before and after, where the change has one (null: nothing before).
    before_value     jsonb null,
    after_value      jsonb null,
    recorded_at      timestamptz not null default now(),

    constraint case_audit_change_ck check (length(change) > 0),
    -- One effect of one kind per event and case: applying it twice is a bug the database
    -- refuses (an integrity violation quarantines the row), never a second audit line.
    constraint case_audit_effect_uk unique (consumer_name, source_event_id, change, case_id)
);

-- "What happened to this case?", newest first.
create index case_audit_case_idx
on case_core.case_audit (case_id, recorded_at desc);

-- The case consumers' handlers write it, in the worker (0046's matrix, test/db/security/privileges.ts).
grant insert on case_core.case_audit to inbox_worker;
-- case-sla learns from its insert whether it opened the obligation (RETURNING), to audit
-- and emit only then.
grant select (case_id, obligation_type, due_at, source_event_id) on case_core.sla_obligation to inbox_worker;
