-- Org-scoped API keys. Only the SHA-256 of the token is kept; never the owner role.
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    org_id      uuid NOT NULL,
    name        text NOT NULL,
    role        text NOT NULL CHECK (role IN ('manager', 'finance', 'developer', 'visitor')),
    token_hash  bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_by  uuid NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_by_org ON api_keys (org_id, created_at DESC);
