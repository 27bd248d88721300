-- webhook_dispatcher schema: endpoints (secrets sealed), deliveries (the retry
-- schedule lives here, so a restart loses no pending attempt), and the outbox.

CREATE TABLE endpoints (
    id               uuid PRIMARY KEY,
    org_id           uuid NOT NULL,
    url              text NOT NULL CHECK (length(url) <= 2048),
    -- Sealed `whsec_...` secret; during a rotation the previous one signs too.
    secret           bytea NOT NULL,
    previous_secret  bytea,
    previous_until   timestamptz,
    created_by       uuid NOT NULL,
    created_at       timestamptz NOT NULL,
    deleted_at       timestamptz
);
CREATE INDEX endpoints_live_by_org ON endpoints (org_id, created_at) WHERE deleted_at IS NULL;

-- One row per (endpoint, event, attempt series); a manual retry starts a new series.
CREATE TABLE deliveries (
    id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    endpoint_id       uuid NOT NULL REFERENCES endpoints (id),
    org_id            uuid NOT NULL,
    event_id          uuid NOT NULL,
    event_type        text NOT NULL,
    payload           text NOT NULL,
    series            integer NOT NULL DEFAULT 0,
    status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts          integer NOT NULL DEFAULT 0,
    -- When the next attempt is due; while an attempt is in flight, when its
    -- lease runs out (a crashed dispatcher's attempt is then made again).
    next_attempt_at   timestamptz NOT NULL,
    last_status_code  integer,
    last_error        text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    delivered_at      timestamptz,
    UNIQUE (endpoint_id, event_id, series)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_log ON deliveries (endpoint_id, created_at DESC, id DESC);

CREATE TABLE outbox (
    id            uuid PRIMARY KEY,
    subject       text NOT NULL,
    payload       text NOT NULL,
    traceparent   text,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text
);
