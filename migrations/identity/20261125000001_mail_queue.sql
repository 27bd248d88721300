-- Outbound mail (sign-in links), written in the transaction that creates what
-- the mail carries and sent after the commit by identity's mail worker.
-- The magic-link token is kept only sealed (AES-256-GCM, bound to the row id)
-- until the SMTP server accepts the message; then `sealed` is cleared.
CREATE TABLE mail_queue (
    id              uuid PRIMARY KEY,
    kind            text NOT NULL,
    recipient       text NOT NULL,
    -- The magic link this mail carries (SHA-256 of its token): a link used or
    -- expired before it could be sent is dropped, not sent late.
    token_hash      bytea,
    sealed          bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- A worker holds the row until then while it talks to the SMTP server.
    lease_until     timestamptz,
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text,
    sent_at         timestamptz,
    dropped_at      timestamptz
);

CREATE INDEX mail_queue_due ON mail_queue (next_attempt_at)
    WHERE sent_at IS NULL AND dropped_at IS NULL;
CREATE INDEX mail_queue_done ON mail_queue (created_at)
    WHERE sent_at IS NOT NULL OR dropped_at IS NOT NULL;
