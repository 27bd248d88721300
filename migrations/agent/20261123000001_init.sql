-- agent schema: conversations and their messages, staged actions, memory
-- documents, the activity curation reads, the staff-chosen model, the outbox.
-- The service's search_path is the agent schema; nothing here names another schema.

CREATE TABLE conversations (
    id          uuid PRIMARY KEY,
    user_id     uuid NOT NULL,
    summary     text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    closed_at   timestamptz
);
CREATE INDEX conversations_by_user ON conversations (user_id, created_at DESC);

CREATE TABLE messages (
    id               bigserial PRIMARY KEY,
    conversation_id  uuid NOT NULL REFERENCES conversations (id),
    role             text NOT NULL CHECK (role IN ('user', 'assistant')),
    content          text NOT NULL,
    engine           text,
    tier             text,
    confirmation_id  uuid,
    created_at       timestamptz NOT NULL
);
CREATE INDEX messages_by_conversation ON messages (conversation_id, id);

-- A sensitive action prepared by the assistant; it runs only when its owner
-- confirms it before expires_at. `args` are exactly what `summary` shows.
CREATE TABLE staged_actions (
    id               uuid PRIMARY KEY,
    user_id          uuid NOT NULL,
    conversation_id  uuid NOT NULL REFERENCES conversations (id),
    kind             text NOT NULL
                     CHECK (kind IN ('create_org', 'credit_wallet', 'grant_tokens', 'revoke_session')),
    args             jsonb NOT NULL,
    summary          text NOT NULL,
    status           text NOT NULL DEFAULT 'staged'
                     CHECK (status IN ('staged', 'executing', 'executed', 'failed', 'cancelled')),
    -- The public API's answer when it ran (status and body).
    result           jsonb,
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    decided_at       timestamptz
);
CREATE INDEX staged_actions_by_user ON staged_actions (user_id, created_at DESC);

CREATE TABLE memory_docs (
    user_id          uuid PRIMARY KEY,
    soul_md          text NOT NULL DEFAULT '',
    memory_md        text NOT NULL DEFAULT '',
    last_curated_at  timestamptz,
    curation_count   integer NOT NULL DEFAULT 0,
    -- The user's profile timezone as last learned from identity, and the local
    -- date of the last scheduled curation (one per night, across replicas).
    timezone         text NOT NULL DEFAULT 'UTC',
    last_night       date
);

-- The user's activity from the audit events on NATS; a redelivered event is
-- a no-op (its id is the key). Curation marks what it has processed.
CREATE TABLE activity (
    event_id    uuid PRIMARY KEY,
    user_id     uuid NOT NULL,
    action      text NOT NULL,
    subject     text NOT NULL,
    at          timestamptz NOT NULL,
    curated_at  timestamptz
);
CREATE INDEX activity_uncurated ON activity (user_id, at) WHERE curated_at IS NULL;

-- Staff's choice of model (one row); configuration gives the default.
CREATE TABLE model_choice (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    model       text NOT NULL,
    set_by      uuid NOT NULL,
    updated_at  timestamptz NOT NULL
);

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
