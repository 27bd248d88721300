-- The organizations routed to a distributor entity, newest first, a page at a
-- time (GET /v1/distributors/{id}/organizations: keyset pages on
-- (created_at, id)), without scanning every organization.
CREATE INDEX organizations_by_distributor ON organizations (distributor_id, created_at DESC, id DESC);
