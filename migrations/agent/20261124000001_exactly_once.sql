-- Exactly-once confirmation (proto-docs/agent.md, "Staged actions"):
-- 'unknown': a confirmation was sent and its outcome is not known (a timeout,
-- a lost connection, a 5xx); confirming the same action again re-sends the very
-- same request with the very same Idempotency-Key. An 'executing' row whose
-- attempt_until has passed is treated as unknown (its confirmer stopped).
ALTER TABLE staged_actions DROP CONSTRAINT staged_actions_status_check;
ALTER TABLE staged_actions ADD CONSTRAINT staged_actions_status_check
    CHECK (status IN ('staged', 'executing', 'unknown', 'executed', 'failed', 'cancelled'));
-- attempts: confirmations that may have reached the owning service;
-- attempt_until: the running attempt's lease; seen_orgs (create_org): the
-- caller's organizations when it was first sent, to recognize the one it made.
ALTER TABLE staged_actions
    ADD COLUMN attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN attempt_until timestamptz,
    ADD COLUMN seen_orgs uuid[];
UPDATE staged_actions SET attempts = 1 WHERE status IN ('executing', 'executed', 'failed');

-- The organization whose AI tokens paid for a model-written reply; closing the
-- conversation charges its summary there.
ALTER TABLE messages ADD COLUMN org_id uuid;

-- When the model last wrote this user's memory (at most once per
-- curation.model_interval_secs).
ALTER TABLE memory_docs ADD COLUMN model_curated_at timestamptz;
