-- Validates 0170's check on the rows already there: SHARE UPDATE EXCLUSIVE, so the functions
-- and ops keep reading and writing the audit while it scans.
alter table integration.operator_audit validate constraint operator_audit_action_ck;
