-- An organization's audit history (GET /v1/organizations/{id}/audit): every
-- service's org-scoped actions arrive with the subject `org:<id>`. The
-- organization is derived from the subject once, when the row is written
-- (a subject that is not exactly that shape has none), and indexed with the
-- entry's id, so a page of one organization's history is one index range
-- however long the whole log is. (Adding a stored column rewrites the table
-- once, under a lock, at this migration.)
ALTER TABLE audit_log ADD COLUMN org_id uuid GENERATED ALWAYS AS (
    CASE WHEN subject ~ '^org:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
         THEN substr(subject, 5)::uuid END
) STORED;
CREATE INDEX audit_log_by_org ON audit_log (org_id, id DESC) WHERE org_id IS NOT NULL;
