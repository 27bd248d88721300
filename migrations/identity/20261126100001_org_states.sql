-- Organizations' statuses as org-billing announces them
-- (core.v1.org.status_changed): the bearer lookup puts each membership's
-- status in the identity it resolves, so every service refuses a suspended
-- organization's writes without a call. Only organizations that were ever
-- suspended have a row; `version` orders the changes (a late event never
-- undoes a newer one).
CREATE TABLE org_states (
    org_id      uuid PRIMARY KEY,
    status      text NOT NULL CHECK (status IN ('active', 'suspended')),
    version     bigint NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
