-- The OpenID Provider's authorization code flow and refresh tokens (issue 37).
--
-- An authorization request, checked by GET /oauth/authorize and waiting for
-- the person to sign in at the console; the console accepts or rejects it on
-- the person's behalf (POST /v1/oauth/requests/{handle}/accept). Accepting
-- makes its code: the request row carries the code's hash, its user and the
-- session that signed in. Only hashes of the handle and of the code are kept.
CREATE TABLE oauth_requests (
    handle_hash     bytea PRIMARY KEY CHECK (length(handle_hash) = 32),
    client_id       uuid NOT NULL REFERENCES oauth_clients (id),
    redirect_uri    text NOT NULL,
    scopes          text[] NOT NULL,
    state           text,
    nonce           text,
    code_challenge  text NOT NULL,
    -- prompt=login and max_age: how fresh the sign-in must be; prompt=consent.
    fresh_after     timestamptz,
    force_consent   boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL,
    -- The session that first read the request (the console showing it): only
    -- it may answer, so a handle seen in a log is no use to anyone else.
    viewer_session_id uuid,
    expires_at      timestamptz NOT NULL,
    -- Set when the person accepted:
    user_id         uuid REFERENCES users (id),
    session_id      uuid,
    code_hash       bytea UNIQUE CHECK (length(code_hash) = 32),
    code_expires_at timestamptz,
    code_used_at    timestamptz,
    -- The grant the code was exchanged for (revoked if the code is replayed).
    grant_id        uuid
);
CREATE INDEX oauth_requests_expiry ON oauth_requests (expires_at);

-- Third-party clients ask once per scope set: the scopes a person agreed to.
CREATE TABLE oauth_consents (
    user_id    uuid NOT NULL REFERENCES users (id),
    client_id  uuid NOT NULL REFERENCES oauth_clients (id),
    scopes     text[] NOT NULL,
    granted_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, client_id)
);

-- A grant: one sign-in of one person to one client, bound to the hub session
-- that signed in (revoking the session, or disabling the person, ends it).
-- Its refresh tokens form one family; a refresh token used twice revokes
-- the family.
CREATE TABLE oauth_grants (
    id          uuid PRIMARY KEY,
    client_id   uuid NOT NULL REFERENCES oauth_clients (id),
    user_id     uuid NOT NULL REFERENCES users (id),
    session_id  uuid NOT NULL,
    scopes      text[] NOT NULL,
    auth_time   timestamptz NOT NULL,
    mfa         boolean NOT NULL,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
CREATE INDEX oauth_grants_user ON oauth_grants (user_id);
CREATE INDEX oauth_grants_session ON oauth_grants (session_id);

CREATE TABLE oauth_refresh_tokens (
    token_hash  bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    grant_id    uuid NOT NULL REFERENCES oauth_grants (id),
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX oauth_refresh_tokens_grant ON oauth_refresh_tokens (grant_id);
