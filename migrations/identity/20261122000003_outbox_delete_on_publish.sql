-- The outbox holds only pending events: the relay deletes a row once JetStream
-- acknowledged it (the event then lives in the stream). The table stays small,
-- so the hot path pays for the primary key only.
DROP INDEX outbox_pending;
DELETE FROM outbox WHERE published_at IS NOT NULL;
ALTER TABLE outbox DROP COLUMN published_at;
