-- ops reingest-failed (docs/ops.md) re-ingests the on-failure bucket's batches through a
-- consumer's ingest function, and says so in the operator audit: one more action.
--
-- Expand only: the release before this one writes the actions it knew, all still admitted.
-- The widened check is added NOT VALID (a moment's lock, no scan); the next file validates
-- it without blocking writers.
alter table integration.operator_audit drop constraint operator_audit_action_ck;
alter table integration.operator_audit add constraint operator_audit_action_ck check (
    action in ('replay', 'resolve', 'reingest', 'pause', 'resume', 'schedule-replay', 'scheduled-replay-refused',
               'reingest-failed')) not valid;
