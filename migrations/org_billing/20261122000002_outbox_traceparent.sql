-- W3C trace context of the request that wrote the event, sent as a NATS header.
ALTER TABLE outbox ADD COLUMN traceparent text;
