-- server_product schema: the SKU catalog, servers and their one lifecycle,
-- durable provisioning jobs, usage periods, the product event history,
-- maintenance windows, and the outbox. Nothing here names another schema.

-- SKUs are data: the dev/test seed inserts some; production manages them.
CREATE TABLE skus (
    id                   text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    name                 text NOT NULL,
    fulfilment           text NOT NULL CHECK (fulfilment IN ('api', 'manual')),
    sla_hours            integer CHECK (sla_hours > 0),
    badges               text[] NOT NULL DEFAULT '{}',
    monthly_price_minor  bigint NOT NULL CHECK (monthly_price_minor >= 0),
    currency             text NOT NULL CHECK (currency IN ('TRY', 'EUR', 'USD')),
    listed               boolean NOT NULL DEFAULT true,
    position             integer NOT NULL DEFAULT 0,
    CHECK ((fulfilment = 'manual') = (sla_hours IS NOT NULL))
);

CREATE TABLE servers (
    id              uuid PRIMARY KEY,
    org_id          uuid NOT NULL,
    sku_id          text NOT NULL REFERENCES skus (id),
    hostname        text NOT NULL,
    status          text NOT NULL CHECK (status IN ('provisioning', 'pending_fulfilment', 'active',
                                                    'stopped', 'suspended', 'failed', 'terminated')),
    fulfilment      text NOT NULL CHECK (fulfilment IN ('api', 'manual')),
    provider_ref    text,
    -- Sealed JSON {username, password, host}; set once active.
    credentials     bytea,
    -- Manual fulfilment: when the SLA says it must be done.
    due_at          timestamptz,
    failure         text,
    created_by      uuid NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    activated_at    timestamptz,
    terminated_at   timestamptz
);
-- A hostname is unique per organization among servers that hold it.
CREATE UNIQUE INDEX servers_hostname_per_org ON servers (org_id, hostname)
    WHERE status NOT IN ('terminated', 'failed');
CREATE INDEX servers_by_org ON servers (org_id, created_at DESC, id DESC);
CREATE INDEX servers_fulfilment_queue ON servers (due_at) WHERE status = 'pending_fulfilment';

-- Provisioning through the provider API, durable: a restart picks them up.
CREATE TABLE provision_jobs (
    server_id  uuid PRIMARY KEY REFERENCES servers (id),
    due_at     timestamptz NOT NULL,
    attempts   integer NOT NULL DEFAULT 0
);
CREATE INDEX provision_jobs_due ON provision_jobs (due_at);

-- Billable time: a period opens when a server becomes active (or resized, or
-- transferred) and closes, in the same transaction, when that ends.
CREATE TABLE usage_periods (
    id          bigserial PRIMARY KEY,
    server_id   uuid NOT NULL REFERENCES servers (id),
    org_id      uuid NOT NULL,
    sku_id      text NOT NULL REFERENCES skus (id),
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE UNIQUE INDEX usage_periods_one_open ON usage_periods (server_id) WHERE ended_at IS NULL;
CREATE INDEX usage_periods_by_org ON usage_periods (org_id, server_id, started_at);

-- Every product event, kept for the organization's data export.
CREATE TABLE events (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL,
    server_id   uuid NOT NULL,
    type        text NOT NULL,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX events_by_org ON events (org_id, created_at);

CREATE TABLE maintenance_windows (
    id           uuid PRIMARY KEY,
    title        text NOT NULL,
    description  text NOT NULL DEFAULT '',
    starts_at    timestamptz NOT NULL,
    ends_at      timestamptz NOT NULL CHECK (ends_at > starts_at),
    created_by   uuid NOT NULL,
    created_at   timestamptz NOT NULL
);
CREATE INDEX maintenance_upcoming ON maintenance_windows (ends_at);

-- Transactional outbox (service-kit's relay publishes it).
CREATE TABLE outbox (
    id            uuid PRIMARY KEY,
    subject       text NOT NULL,
    payload       text NOT NULL,
    traceparent   text,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text
);
