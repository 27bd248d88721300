-- Organizations' statuses as org-billing announces them
-- (core.v1.org.status_changed): a suspended organization's deliveries wait in
-- the queue, parked (never due), until it is reactivated. Only organizations
-- that were ever suspended have a row; `version` orders the changes (a late
-- event never undoes a newer one).
CREATE TABLE org_states (
    org_id      uuid PRIMARY KEY,
    suspended   boolean NOT NULL,
    version     bigint NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
-- The claim and the fan-out lock the suspended ones (FOR SHARE) to order
-- their parking against a reactivation's unparking.
CREATE INDEX org_states_suspended ON org_states (org_id) WHERE suspended;
