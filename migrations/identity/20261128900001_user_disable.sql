-- Staff disable a user: while disabled_at is set no session of theirs
-- resolves and no sign-in opens one (their sessions and the API keys they
-- created are revoked when it is set). The reason is for staff, never in the
-- audit detail.
ALTER TABLE users
    ADD COLUMN disabled_at      timestamptz,
    ADD COLUMN disabled_reason  text CHECK (length(disabled_reason) <= 500),
    ADD CONSTRAINT users_disabled_has_reason
        CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL));

-- Staff search users by the start of their email or name, newest first.
CREATE INDEX users_by_email_prefix ON users (email text_pattern_ops);
CREATE INDEX users_by_name_prefix ON users (lower(name) text_pattern_ops);
CREATE INDEX users_newest ON users (created_at DESC, id DESC);
