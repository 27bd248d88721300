-- Audit detail never holds personal data: a name change now records the
-- changed field's name ({"fields": ["name"]}), as profile changes do. Entries
-- recorded before held the new name itself; they say the same thing now.
UPDATE audit_log SET detail = '{"fields": ["name"]}'::jsonb
WHERE action = 'user.name_changed' AND detail ? 'name';
