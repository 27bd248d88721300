-- Deleted accounts (core.v1.identity.user_deleted): their activity is erased
-- by user, and an audit event of theirs that arrives after the erasure is not
-- stored again.
CREATE INDEX activity_by_user ON activity (user_id);
CREATE TABLE erased_users (
    user_id    uuid PRIMARY KEY,
    erased_at  timestamptz NOT NULL DEFAULT now()
);
