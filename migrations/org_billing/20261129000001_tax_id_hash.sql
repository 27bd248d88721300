-- Staff search organizations by tax id without opening any sealed identity:
-- HMAC-SHA256(sealing.search_key, the normalized tax id), written with the
-- legal identity (kyc::apply) and backfilled by `migrate` / start-up for
-- identities sealed before this column (kyc::finish_migrations). NULL: no
-- verified identity (or not yet backfilled).
ALTER TABLE organizations ADD COLUMN tax_id_hash bytea;
CREATE INDEX organizations_by_tax_id_hash ON organizations (tax_id_hash)
    WHERE tax_id_hash IS NOT NULL;
-- Name prefix search uses organizations_by_lower_name (20261123000004).
