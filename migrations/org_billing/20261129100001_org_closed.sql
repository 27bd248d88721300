-- Its owner may close an organization (POST /v1/organizations/{id}/close):
-- `closed` is final (no API moves it back); the records stay.
ALTER TABLE organizations DROP CONSTRAINT organizations_status_check;
ALTER TABLE organizations ADD CONSTRAINT organizations_status_check
    CHECK (status IN ('active', 'suspended', 'closed'));
