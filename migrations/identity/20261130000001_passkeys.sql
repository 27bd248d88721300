-- Passkeys (WebAuthn discoverable credentials) and how each session was
-- opened (the OpenID Provider's `amr`).

-- A user's passkey. `credential` is webauthn-rs's serialized Passkey: the
-- credential id, the public key (COSE), the signature counter and the backup
-- flags (no secret: the private key never leaves the authenticator). The
-- columns beside it are what lists and lookups need without parsing it.
CREATE TABLE passkeys (
    id               uuid PRIMARY KEY,
    user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The authenticator's credential id (raw bytes; WebAuthn allows up to
    -- 1023). One credential belongs to one account.
    credential_id    bytea NOT NULL UNIQUE CHECK (length(credential_id) BETWEEN 1 AND 1023),
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    credential       jsonb NOT NULL,
    backup_eligible  boolean NOT NULL,
    backed_up        boolean NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_used_at     timestamptz
);
CREATE INDEX passkeys_by_user ON passkeys (user_id, created_at DESC);

-- A WebAuthn ceremony halfway: the challenge sent to the browser and the
-- state webauthn-rs needs to finish it, kept here so that any replica
-- finishes what another began. Taken (deleted) by the finishing call: a
-- challenge answers once. `kind`: register (user_id: the registering user),
-- login (usernameless: no user yet), mfa (the second factor after a magic
-- link: the user of the mfa_token whose hash is kept).
CREATE TABLE passkey_challenges (
    id              uuid PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('register', 'login', 'mfa')),
    user_id         uuid REFERENCES users (id) ON DELETE CASCADE,
    mfa_token_hash  bytea CHECK (length(mfa_token_hash) = 32),
    state           jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    CHECK ((kind = 'login') = (user_id IS NULL)),
    CHECK ((kind = 'mfa') = (mfa_token_hash IS NOT NULL))
);
CREATE INDEX passkey_challenges_expiry ON passkey_challenges (expires_at);

-- How the session was opened, as RFC 8176 `amr` values: ['email'] (a magic
-- link), ['email', 'otp', 'mfa'] (then a code), ['hwk' or 'swk', 'user',
-- 'mfa'] (a passkey), ['email', 'hwk' or 'swk', 'user', 'mfa'] (a link, then
-- a passkey). Sessions before this migration: from their mfa flag.
ALTER TABLE sessions ADD COLUMN amr text[] NOT NULL DEFAULT '{email}';
UPDATE sessions SET amr = '{email,otp,mfa}' WHERE mfa;
ALTER TABLE oauth_grants ADD COLUMN amr text[] NOT NULL DEFAULT '{email}';
UPDATE oauth_grants SET amr = '{email,otp,mfa}' WHERE mfa;
