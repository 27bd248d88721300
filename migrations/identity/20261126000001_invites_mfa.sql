-- Invites to an organization and multi-factor sign-in (TOTP).

-- An invitation of an email address to an organization with a role (never
-- owner). Only the SHA-256 of its token is kept; the token itself is shown in
-- the creation answer and mailed (sealed in mail_queue until sent). A pending
-- invite past expires_at reads as expired at once; the sweep writes it so.
CREATE TABLE invites (
    id           uuid PRIMARY KEY,
    org_id       uuid NOT NULL,
    email        text NOT NULL CHECK (email = lower(email) AND length(email) <= 254),
    role         text NOT NULL CHECK (role IN ('manager', 'finance', 'developer', 'visitor')),
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'accepted', 'revoked', 'expired')),
    token_hash   bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    invited_by   uuid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- The user who accepted it (status accepted).
    accepted_by  uuid
);
-- One pending invite per email and organization.
CREATE UNIQUE INDEX invites_one_pending ON invites (org_id, email) WHERE status = 'pending';
CREATE INDEX invites_by_org ON invites (org_id, created_at DESC);
CREATE INDEX invites_pending_expiry ON invites (expires_at) WHERE status = 'pending';
CREATE INDEX invites_done ON invites (updated_at) WHERE status <> 'pending';

-- A user's TOTP (RFC 6238) secret, sealed (AES-256-GCM, bound to the user),
-- never stored in the clear. enabled_at NULL: enrolled, not yet confirmed.
-- last_step: the last time step a code was accepted at (codes of that step or
-- earlier are refused: a code works once).
CREATE TABLE mfa (
    user_id        uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    secret_sealed  bytea NOT NULL,
    enabled_at     timestamptz,
    last_step      bigint,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Single-use recovery codes (SHA-256 only), made when MFA is confirmed.
CREATE TABLE mfa_recovery_codes (
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash  bytea NOT NULL CHECK (length(code_hash) = 32),
    used_at    timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

-- A sign-in halfway: the magic link was redeemed by a user with MFA on, and a
-- code is owed. Only the SHA-256 of the mfa_token is kept. After
-- mfa.max_attempts failures the token is dead.
CREATE TABLE mfa_challenges (
    token_hash  bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    failures    integer NOT NULL DEFAULT 0,
    used_at     timestamptz
);
CREATE INDEX mfa_challenges_expiry ON mfa_challenges (expires_at);

-- Whether the session was opened through a second factor (mfa.staff_required).
ALTER TABLE sessions ADD COLUMN mfa boolean NOT NULL DEFAULT false;
