-- Contract of 0200_row_deletes_without_table_locks.sql: the consumer kinds lose the
-- table-level DELETE that let a consumer's role take any LOCK TABLE mode on a shared table.
--
-- The release that added integration.delete_claimed_lanes, delete_claimed_outbox_lanes,
-- delete_idle_outbox_lanes and delete_published_outbox (0200) moved its worker and relay to
-- them; the release before it still deletes with these privileges. So this file waits for
-- the release after 0200's, which moves it into migrations/ with its next number: that
-- release's deploy runs under 0200's functions, which no longer use the privileges.
-- test/db/upgrade/next-release.test.ts applies it after migrations/ and runs 0200's
-- functions on the result.
revoke delete on integration.consumer_lane from inbox_worker;
revoke delete on integration.outbox from inbox_relay;
revoke delete on integration.outbox_lane from inbox_relay;
