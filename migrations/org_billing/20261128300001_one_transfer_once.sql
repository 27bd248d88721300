-- One bank transfer is credited once (security review 3, issue 32). A
-- transfer is known by (organization, reference, amount, currency) and, for
-- a payment, the day it arrived: a second payment or approved claim with the
-- same key is refused unless staff confirm it is a different transfer, which
-- is then recorded as duplicate_confirmed and leaves the unique indexes
-- below. The indexes are what holds under concurrency.
ALTER TABLE payments ADD COLUMN duplicate_confirmed boolean NOT NULL DEFAULT false;
ALTER TABLE payment_claims ADD COLUMN duplicate_confirmed boolean NOT NULL DEFAULT false;

-- Rows recorded before this rule: every duplicate but the first counts as
-- confirmed (payments are append-only; this one change is made with the
-- trigger off, in this migration's transaction).
ALTER TABLE payments DISABLE TRIGGER payments_append_only;
UPDATE payments p SET duplicate_confirmed = true
 WHERE EXISTS (SELECT 1 FROM payments q
                WHERE q.org_id = p.org_id AND lower(q.reference) = lower(p.reference)
                  AND q.amount_minor = p.amount_minor AND q.currency = p.currency
                  AND q.received_at = p.received_at AND (q.created_at, q.id) < (p.created_at, p.id));
ALTER TABLE payments ENABLE TRIGGER payments_append_only;
UPDATE payment_claims c SET duplicate_confirmed = true
 WHERE c.status = 'approved' AND EXISTS
       (SELECT 1 FROM payment_claims d
         WHERE d.status = 'approved' AND d.org_id = c.org_id
           AND lower(d.reference) = lower(c.reference) AND d.amount_minor = c.amount_minor
           AND d.currency = c.currency AND (d.created_at, d.id) < (c.created_at, c.id));

CREATE UNIQUE INDEX payments_one_transfer
    ON payments (org_id, lower(reference), amount_minor, currency, received_at)
    WHERE NOT duplicate_confirmed;
CREATE UNIQUE INDEX payment_claims_one_transfer
    ON payment_claims (org_id, lower(reference), amount_minor, currency)
    WHERE status = 'approved' AND NOT duplicate_confirmed;

-- A billing run isolates an organization it cannot invoice (its totals would
-- overflow, ...): the failure is recorded here, the organization is skipped
-- by this run, the others are invoiced. Starting the period's run again
-- clears these rows, so the organization is tried once more.
CREATE TABLE billing_run_failures (
    run_id     uuid NOT NULL REFERENCES billing_runs (id),
    org_id     uuid NOT NULL REFERENCES organizations (id),
    error      text NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, org_id)
);
