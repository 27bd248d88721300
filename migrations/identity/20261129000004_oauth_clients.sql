-- OAuth clients of the OpenID Provider (issue 37), registered by staff
-- (/v1/admin/oauth-clients). A confidential client's secret is kept only as
-- its SHA-256 (256 random bits: a fast hash is enough, as for tokens); a
-- public one has none. Retiring keeps the row (audit points at it).
CREATE TABLE oauth_clients (
    id                        uuid PRIMARY KEY,
    name                      text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    kind                      text NOT NULL CHECK (kind IN ('public', 'confidential')),
    secret_hash               bytea CHECK (length(secret_hash) = 32),
    first_party               boolean NOT NULL,
    redirect_uris             text[] NOT NULL CHECK (cardinality(redirect_uris) BETWEEN 1 AND 10),
    post_logout_redirect_uris text[] NOT NULL CHECK (cardinality(post_logout_redirect_uris) <= 10),
    scopes                    text[] NOT NULL,
    allowed_org_ids           uuid[] NOT NULL CHECK (cardinality(allowed_org_ids) <= 100),
    created_by                uuid NOT NULL,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now(),
    retired_at                timestamptz,
    CHECK ((kind = 'confidential') = (secret_hash IS NOT NULL))
);
CREATE INDEX oauth_clients_newest ON oauth_clients (created_at DESC, id DESC);
