-- kyc schema: submissions (raw payload sealed with AES-256-GCM), each
-- organization's KYC state as this service decides it, and the outbox.
-- The service's search_path is the kyc schema; nothing here names another schema.

CREATE TABLE submissions (
    id                uuid PRIMARY KEY,
    org_id            uuid NOT NULL,
    -- The organization's name when it submitted (the staff queue shows it).
    org_name          text NOT NULL,
    legal_type        text NOT NULL CHECK (legal_type IN ('individual', 'corporate')),
    status            text NOT NULL
                      CHECK (status IN ('pending', 'approved', 'rejected', 'more_info_requested')),
    -- Sealed JSON {fields, address}; NULL once the minimization sweep purged it.
    payload           bytea,
    -- The keys (never the values) of what was submitted, for request-info.
    field_keys        text[] NOT NULL DEFAULT '{}',
    review_notes      text NOT NULL DEFAULT '',
    requested_fields  text[] NOT NULL DEFAULT '{}',
    submitted_by      uuid NOT NULL,
    reviewed_by       uuid,
    reviewed_at       timestamptz,
    created_at        timestamptz NOT NULL,
    purged_at         timestamptz,
    CHECK ((payload IS NULL) = (purged_at IS NOT NULL))
);
-- At most one pending submission per organization, whatever the concurrency.
CREATE UNIQUE INDEX submissions_one_pending ON submissions (org_id) WHERE status = 'pending';
CREATE INDEX submissions_by_org ON submissions (org_id, created_at DESC);
CREATE INDEX submissions_queue ON submissions (created_at) WHERE status = 'pending';
CREATE INDEX submissions_to_purge ON submissions (reviewed_at)
    WHERE purged_at IS NULL AND reviewed_at IS NOT NULL;

-- Each organization's KYC state; `version` orders what org-billing applies.
-- The verified legal identity is kept sealed (invoicing, tax law: ten years),
-- apart from the raw payloads the sweep redacts.
CREATE TABLE org_state (
    org_id          uuid PRIMARY KEY,
    version         bigint NOT NULL,
    kyc_status      text NOT NULL CHECK (kyc_status IN ('unverified', 'pending', 'verified', 'rejected')),
    kyc_tier        integer NOT NULL DEFAULT 0,
    legal_identity  bytea,
    verified_at     timestamptz
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
