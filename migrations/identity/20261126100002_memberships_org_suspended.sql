-- The bearer lookup reads each membership's organization status from the
-- membership row itself (no join per membership on the hottest query):
-- `org_suspended` copies org_states, set when a membership is made (from
-- org_states, under the organization's lock) and for every membership of an
-- organization when its status changes (under the same lock).
ALTER TABLE memberships ADD COLUMN org_suspended boolean NOT NULL DEFAULT false;
UPDATE memberships m SET org_suspended = true
  FROM org_states o WHERE o.org_id = m.org_id AND o.status = 'suspended';
