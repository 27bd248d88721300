-- The delivery queue leaves the delivery log.
--
-- Until now one `deliveries` row per (endpoint, event, series) was both the
-- log and the queue: the claim moved its `next_attempt_at` to a lease and the
-- outcome updated it again, two new versions of a wide row (the payload copied
-- each time) and entries in all four of its indexes, for every delivery, in a
-- table that only grows. Its dead rows made every later claim slower.
--
-- Now:
--   events      one row per product event that reached an endpoint: its
--               payload once, however many endpoints it goes to;
--   deliveries  the log, one narrow row per (endpoint, event, series), only
--               ever inserted;
--   queue       one row per delivery that is waiting or in flight, deleted
--               when it is settled: a small table whose churn vacuum clears;
--   outcomes    one row per attempt (and one when an endpoint's deletion stops
--               a delivery), only ever inserted.
-- `delivery_log` reads a delivery's state as its latest outcome.

CREATE TABLE events (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL,
    event_type  text NOT NULL,
    -- The body exactly as committed: what is signed and sent.
    payload     text NOT NULL,
    created_at  timestamptz NOT NULL
);

INSERT INTO events (id, org_id, event_type, payload, created_at)
SELECT DISTINCT ON (event_id) event_id, org_id, event_type, payload, created_at
FROM deliveries ORDER BY event_id, created_at;

-- Waiting and in-flight deliveries. `due_at` is when the next attempt is
-- due; while an attempt is in flight, when its lease runs out (a crashed
-- dispatcher's attempt is then made again). `attempts` (made so far) fences
-- outcomes: one is recorded only while the row still has the count its
-- attempt started from. No foreign keys: rows are written by the statements
-- that write their delivery, and a per-row check would double their cost.
CREATE TABLE queue (
    delivery_id  uuid PRIMARY KEY,
    endpoint_id  uuid NOT NULL,
    event_id     uuid NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    due_at       timestamptz NOT NULL
);
CREATE INDEX queue_due ON queue (due_at);
-- Every claim and outcome leaves a dead version: vacuum after a few thousand
-- changes rather than after a fifth of the table (the table is small, so
-- each vacuum is quick).
ALTER TABLE queue SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.05
);

INSERT INTO queue (delivery_id, endpoint_id, event_id, attempts, due_at)
SELECT id, endpoint_id, event_id, attempts, next_attempt_at
FROM deliveries WHERE status = 'pending';

-- The attempt log. `seq` orders a delivery's outcomes (an attempt's is the
-- attempt's number; the one an endpoint's deletion writes follows the last
-- attempt); `attempts` is how many were made by then; `status` is the
-- delivery's state after it (`pending`: another attempt is due).
CREATE TABLE outcomes (
    delivery_id  uuid NOT NULL,
    seq          integer NOT NULL,
    attempts     integer NOT NULL,
    status       text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    status_code  integer,
    error        text,
    at           timestamptz NOT NULL,
    PRIMARY KEY (delivery_id, seq)
);

-- What the old rows knew: their latest outcome.
INSERT INTO outcomes (delivery_id, seq, attempts, status, status_code, error, at)
SELECT id, greatest(attempts, 1), attempts, status, last_status_code, last_error,
       COALESCE(delivered_at, updated_at)
FROM deliveries WHERE attempts > 0 OR status <> 'pending';

-- The log keeps its identity and its (endpoint, event, series) uniqueness;
-- everything that changed moves out.
ALTER TABLE deliveries
    DROP COLUMN org_id,
    DROP COLUMN event_type,
    DROP COLUMN payload,
    DROP COLUMN status,
    DROP COLUMN attempts,
    DROP COLUMN next_attempt_at,
    DROP COLUMN last_status_code,
    DROP COLUMN last_error,
    DROP COLUMN updated_at,
    DROP COLUMN delivered_at;
ALTER TABLE deliveries RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_cost_delay,
    autovacuum_analyze_scale_factor
);

-- A delivery as the API shows it: its latest outcome, or pending and not yet
-- attempted.
CREATE VIEW delivery_log AS
SELECT d.id, d.endpoint_id, ev.org_id, d.event_id, ev.event_type, d.series,
       COALESCE(o.attempts, 0) AS attempts,
       COALESCE(o.status, 'pending') AS status,
       o.status_code AS last_status_code,
       o.error AS last_error,
       d.created_at,
       COALESCE(o.at, d.created_at) AS updated_at,
       CASE WHEN o.status = 'delivered' THEN o.at END AS delivered_at
FROM deliveries d
JOIN events ev ON ev.id = d.event_id
LEFT JOIN LATERAL (
    SELECT x.attempts, x.status, x.status_code, x.error, x.at
    FROM outcomes x WHERE x.delivery_id = d.id
    ORDER BY x.seq DESC LIMIT 1
) o ON true;
