-- An organization's owner may close it (org-billing): the status `closed`,
-- final. Like a suspension it is copied onto the memberships so the session
-- lookup needs no join; a closed organization's memberships resolve with
-- `"status": "closed"` and every write of its members is refused.
ALTER TABLE org_states DROP CONSTRAINT org_states_status_check;
ALTER TABLE org_states ADD CONSTRAINT org_states_status_check
    CHECK (status IN ('active', 'suspended', 'closed'));
ALTER TABLE memberships ADD COLUMN org_closed boolean NOT NULL DEFAULT false;
