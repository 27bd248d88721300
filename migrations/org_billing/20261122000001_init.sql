-- org_billing schema: distributors and their coverage, organizations, wallets with
-- an append-only ledger, AI-token balances with an append-only ledger, a replica of
-- memberships (for counts), idempotency keys, outbox.

CREATE TABLE distributors (
    id             uuid PRIMARY KEY,
    name           text NOT NULL,
    country        char(2) NOT NULL,
    legal_name     text NOT NULL DEFAULT '',
    tax_id         text NOT NULL DEFAULT '',
    address        text NOT NULL DEFAULT '',
    bank_name      text NOT NULL DEFAULT '',
    bank_iban      text NOT NULL DEFAULT '',
    bank_swift     text NOT NULL DEFAULT '',
    contact_phone  text NOT NULL DEFAULT '',
    contact_email  text NOT NULL DEFAULT '',
    notes          text NOT NULL DEFAULT '',
    profit_pct     numeric(5, 2) NOT NULL DEFAULT 0,
    currency       text NOT NULL CHECK (currency IN ('TRY', 'EUR', 'USD')),
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Routing is data: which entity serves organizations of which country.
CREATE TABLE distributor_coverage (
    country         char(2) PRIMARY KEY,
    distributor_id  uuid NOT NULL REFERENCES distributors (id)
);

CREATE TABLE organizations (
    id                   uuid PRIMARY KEY,
    name                 text NOT NULL,
    legal_type           text NOT NULL CHECK (legal_type IN ('individual', 'corporate')),
    country              char(2) NOT NULL,
    distributor_id       uuid NOT NULL REFERENCES distributors (id),
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    kyc_status           text NOT NULL DEFAULT 'unverified'
                         CHECK (kyc_status IN ('unverified', 'pending', 'verified', 'rejected')),
    kyc_tier             integer NOT NULL DEFAULT 0,
    kyc_locked           boolean NOT NULL DEFAULT false,
    kyc_verified_at      timestamptz,
    legal_name           text NOT NULL DEFAULT '',
    tax_id               text NOT NULL DEFAULT '',
    registration_number  text NOT NULL DEFAULT '',
    registered_address   jsonb NOT NULL DEFAULT
        '{"line1": "", "line2": "", "city": "", "region": "", "postal_code": "", "country": ""}'::jsonb,
    created_by           uuid NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now()
);

-- One wallet per organization, created with it. balance_minor always equals the
-- sum of the organization's wallet_transactions.delta_minor.
CREATE TABLE wallets (
    org_id         uuid PRIMARY KEY REFERENCES organizations (id),
    currency       text NOT NULL CHECK (currency IN ('TRY', 'EUR', 'USD')),
    balance_minor  bigint NOT NULL DEFAULT 0 CHECK (balance_minor >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE wallet_transactions (
    id             bigserial PRIMARY KEY,
    org_id         uuid NOT NULL REFERENCES wallets (org_id),
    delta_minor    bigint NOT NULL CHECK (delta_minor <> 0),
    balance_after  bigint NOT NULL CHECK (balance_after >= 0),
    kind           text NOT NULL,
    note           text NOT NULL DEFAULT '',
    actor_user_id  uuid,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wallet_transactions_by_org ON wallet_transactions (org_id, id DESC);

-- The ledger is append-only: no updates, no deletes.
CREATE FUNCTION forbid_ledger_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger rows are append-only (% on %)', TG_OP, TG_TABLE_NAME;
END $$;
CREATE TRIGGER wallet_transactions_append_only BEFORE UPDATE OR DELETE ON wallet_transactions
    FOR EACH ROW EXECUTE FUNCTION forbid_ledger_change();

CREATE TABLE token_balances (
    org_id      uuid PRIMARY KEY REFERENCES organizations (id),
    balance     bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE token_transactions (
    id             bigserial PRIMARY KEY,
    org_id         uuid NOT NULL REFERENCES token_balances (org_id),
    delta          bigint NOT NULL CHECK (delta <> 0),
    balance_after  bigint NOT NULL CHECK (balance_after >= 0),
    kind           text NOT NULL CHECK (kind IN ('grant', 'spend')),
    reason         text NOT NULL DEFAULT '',
    actor_user_id  uuid,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX token_transactions_by_org ON token_transactions (org_id, id DESC);
CREATE TRIGGER token_transactions_append_only BEFORE UPDATE OR DELETE ON token_transactions
    FOR EACH ROW EXECUTE FUNCTION forbid_ledger_change();

-- Replica of identity's memberships (from core.v1.membership.changed), for counts.
CREATE TABLE org_members (
    org_id      uuid NOT NULL,
    user_id     uuid NOT NULL,
    role        text NOT NULL,
    changed_at  timestamptz NOT NULL,
    PRIMARY KEY (org_id, user_id)
);

-- Idempotency-Key: the first result of a staff operation, replayed on retries.
CREATE TABLE idempotency_keys (
    scope         text NOT NULL,
    key           text NOT NULL,
    request_hash  bytea NOT NULL,
    status        integer,
    body          jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);

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
