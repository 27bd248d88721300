-- The version of the KYC state (decided by kyc) an organization shows: a state
-- is applied only when newer, whichever path (push or event) brings it first.
ALTER TABLE organizations ADD COLUMN kyc_version bigint NOT NULL DEFAULT 0;
