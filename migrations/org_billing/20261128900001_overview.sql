-- The staff overview counts suspended organizations (and the oldest
-- suspension) without reading the active ones.
CREATE INDEX organizations_suspended ON organizations (status_changed_at) WHERE status = 'suspended';
