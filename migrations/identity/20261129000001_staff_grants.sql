-- Staff granted through the API (PUT /v1/admin/staff/{user_id}, by a staff
-- member whose session was opened through MFA). The configured
-- auth.staff_emails stay staff besides these: the bootstrap, changed only in
-- configuration. The bearer lookup reads this table (one primary-key probe).
CREATE TABLE staff_grants (
    user_id    uuid PRIMARY KEY REFERENCES users (id),
    granted_by uuid NOT NULL REFERENCES users (id),
    granted_at timestamptz NOT NULL DEFAULT now()
);
