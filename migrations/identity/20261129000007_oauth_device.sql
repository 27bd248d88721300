-- The device authorization grant (RFC 8628, issue 37): a command-line tool
-- asks for a device code and shows the person a short user code; the person
-- enters it at the console, signed in, and accepts; the tool polls the token
-- endpoint until then. Only hashes of both codes are kept (the user code is
-- short: entering codes is rate-limited per session).
CREATE TABLE oauth_device_requests (
    device_code_hash bytea PRIMARY KEY CHECK (length(device_code_hash) = 32),
    user_code_hash   bytea NOT NULL UNIQUE CHECK (length(user_code_hash) = 32),
    client_id        uuid NOT NULL REFERENCES oauth_clients (id),
    scopes           text[] NOT NULL,
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    -- The polling interval (RFC 8628 3.5: slow_down adds 5 seconds).
    interval_secs    integer NOT NULL,
    last_poll_at     timestamptz,
    -- The person's answer.
    user_id          uuid REFERENCES users (id),
    session_id       uuid,
    approved         boolean,
    -- Set when the tool got its tokens (once).
    used_at          timestamptz
);
CREATE INDEX oauth_device_requests_expiry ON oauth_device_requests (expires_at);
