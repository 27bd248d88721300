-- The passkey a session was opened with (NULL: another way): deleting a
-- passkey revokes the sessions it opened, and with them their OAuth grants.
ALTER TABLE sessions ADD COLUMN passkey_id uuid;
CREATE INDEX sessions_by_passkey ON sessions (passkey_id) WHERE passkey_id IS NOT NULL;
