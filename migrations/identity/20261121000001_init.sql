-- identity schema: users, magic links, sessions, memberships, audit, rate limits, outbox.
-- The service's search_path is the identity schema; nothing here names another schema.

CREATE TABLE users (
    id          uuid PRIMARY KEY,
    email       text NOT NULL UNIQUE CHECK (email = lower(email) AND length(email) <= 254),
    name        text NOT NULL DEFAULT '',
    phone       text NOT NULL DEFAULT '',
    job_title   text NOT NULL DEFAULT '',
    timezone    text NOT NULL DEFAULT 'UTC',
    locale      text NOT NULL DEFAULT 'en' CHECK (locale IN ('en', 'tr')),
    bio         text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a magic-link token is kept.
CREATE TABLE magic_links (
    token_hash  bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX magic_links_expiry ON magic_links (expires_at);

-- Only the SHA-256 of a session token is kept.
CREATE TABLE sessions (
    id          uuid PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash  bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    ip          text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
CREATE INDEX sessions_by_user ON sessions (user_id, created_at DESC);
CREATE INDEX sessions_expiry ON sessions (expires_at);

-- Memberships live here because /v1/auth/me needs them on the hot path.
CREATE TABLE memberships (
    org_id      uuid NOT NULL,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role        text NOT NULL CHECK (role IN ('owner', 'manager', 'finance', 'developer', 'visitor')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX memberships_by_user ON memberships (user_id);

-- Append-only audit history. event_id de-duplicates events consumed from NATS.
CREATE TABLE audit_log (
    id             bigserial PRIMARY KEY,
    event_id       uuid UNIQUE,
    actor_user_id  uuid,
    action         text NOT NULL,
    subject        text NOT NULL DEFAULT '',
    detail         jsonb NOT NULL DEFAULT '{}'::jsonb,
    ip             text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_by_actor ON audit_log (actor_user_id, id DESC);

-- Sliding-window rate limits, shared by every replica.
CREATE TABLE rate_limit_hits (
    bucket  text NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rate_limit_hits_by_bucket ON rate_limit_hits (bucket, at);
CREATE INDEX rate_limit_hits_by_time ON rate_limit_hits (at);

-- Transactional outbox (service-kit's relay publishes it).
CREATE TABLE outbox (
    id            uuid PRIMARY KEY,
    subject       text NOT NULL,
    payload       text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    published_at  timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text
);
CREATE INDEX outbox_pending ON outbox (created_at) WHERE published_at IS NULL;
