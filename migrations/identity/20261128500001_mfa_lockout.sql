-- MFA lockout (issue 32): wrong codes in a row (confirm, disable, verify)
-- counted per user; after mfa.lockout_after_failures of them every code
-- attempt is refused until locked_until, each further lockout (without a
-- right code between) twice as long as the one before, capped
-- (mfa.lockout_base_secs, mfa.lockout_max_secs). A right code resets both.
ALTER TABLE mfa
    ADD COLUMN failed_codes integer NOT NULL DEFAULT 0,
    ADD COLUMN lockouts     integer NOT NULL DEFAULT 0,
    ADD COLUMN locked_until timestamptz;
