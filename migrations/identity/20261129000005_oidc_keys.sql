-- The OpenID Provider's signing keys (issue 37): ES256, the private key
-- (PKCS#8) sealed with identity's sealing key (AES-256-GCM, bound to the
-- kid), the public key as the JWK the JWKS publishes. The newest key whose
-- window has begun signs; each key is published from its making (ahead of its
-- window: relying parties see it before any token carries it) until every
-- token it signed has expired. Times are identity's clock, written by it.
CREATE TABLE oidc_keys (
    kid              text PRIMARY KEY,
    alg              text NOT NULL CHECK (alg = 'ES256'),
    private_sealed   bytea NOT NULL,
    public_jwk       jsonb NOT NULL,
    published_from   timestamptz NOT NULL,
    signs_from       timestamptz NOT NULL,
    signs_until      timestamptz NOT NULL CHECK (signs_until > signs_from),
    published_until  timestamptz NOT NULL CHECK (published_until >= signs_until)
);
