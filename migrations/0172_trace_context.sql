-- One trace per event across the asynchronous gap (docs/tracing.md): the W3C trace context
-- its producer sent (traceparent, tracestate) is kept with the event, as a carrier
-- { "traceparent": "...", "tracestate": "..." }, in a column of its own: on the inbox row
-- for every attempt, replay and resolve; with the key when the row leaves the inbox; and on
-- each event a handler emits (the processing span's), for the relay's Kafka header.
--
-- Expand only: nullable columns, no default, no rewrite. The release before this one
-- inserts without them (null: no context) and reads none of them.
alter table integration.consumer_inbox add column trace_context jsonb null;
alter table integration.consumed_events add column trace_context jsonb null;
alter table integration.outbox add column trace_context jsonb null;
