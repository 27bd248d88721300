-- The staff overview counts the proposals waiting for a decision without
-- reading the decided ones.
CREATE INDEX proposals_waiting ON proposals (created_at) WHERE status = 'draft';
