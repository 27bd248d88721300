-- A user deleted their account (DELETE /v1/auth/me): the row stays as the
-- pseudonym other records (audit, invoices' actors, KYC reviews) point at,
-- with every personal field erased; it is also disabled, so no sign-in,
-- session or key of it ever resolves again.
ALTER TABLE users ADD COLUMN deleted_at timestamptz;
