-- The plaintext legal identity columns go. org-billing seals their contents
-- into `legal_identity` (and blanks them) before it applies this migration;
-- run any other way, this refuses while anything is left in clear, so that no
-- verified identity is lost.
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM organizations
        WHERE legal_name <> '' OR tax_id <> '' OR registration_number <> ''
           OR EXISTS (SELECT 1 FROM jsonb_each(registered_address) a
                      WHERE a.value NOT IN ('""'::jsonb, 'null'::jsonb))
    ) THEN
        RAISE EXCEPTION 'organizations still hold legal identities in clear: start org-billing '
            '(or its migrate subcommand) with sealing.keys set; it seals them before this step';
    END IF;
END $$;

ALTER TABLE organizations
    DROP COLUMN legal_name,
    DROP COLUMN tax_id,
    DROP COLUMN registration_number,
    DROP COLUMN registered_address;
