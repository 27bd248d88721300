-- Billing records: charges, invoices and proformas with their lines and
-- gapless numbers, payments and what they paid, payment claims, billing runs,
-- and the observers of each distributor entity. State machines and the
-- numbering rule: proto-docs/billing.md.

-- Who may read a distributor entity's organizations, invoices, payments and
-- report (role `observer` only). Not members of those organizations.
CREATE TABLE distributor_staff (
    distributor_id  uuid NOT NULL REFERENCES distributors (id),
    user_id         uuid NOT NULL,
    email           text NOT NULL,
    role            text NOT NULL DEFAULT 'observer' CHECK (role = 'observer'),
    since           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (distributor_id, user_id)
);
CREATE INDEX distributor_staff_by_user ON distributor_staff (user_id);

-- Something an organization owes, before it is on a document. Usage charges
-- come from server-product's usage periods (source_ref names the period: a
-- redelivered event finds it taken); staff add others.
--   pending -> quoted (on a proforma) -> pending (the proforma voided)
--   pending | quoted -> invoiced (final);  pending -> waived (final)
CREATE TABLE charges (
    id            uuid PRIMARY KEY,
    org_id        uuid NOT NULL REFERENCES organizations (id),
    description   text NOT NULL,
    brand         text NOT NULL,
    qty           integer NOT NULL DEFAULT 1 CHECK (qty > 0),
    unit_minor    bigint NOT NULL CHECK (unit_minor >= 0),
    amount_minor  bigint NOT NULL CHECK (amount_minor > 0),
    currency      text NOT NULL CHECK (currency IN ('TRY', 'EUR', 'USD')),
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'quoted', 'invoiced', 'waived')),
    source        text NOT NULL CHECK (source IN ('usage', 'staff')),
    source_ref    text UNIQUE,
    -- Usage charges: the month (YYYY-MM) a billing run invoices them in.
    period        text CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    -- The proforma (quoted) or invoice (invoiced) holding it.
    invoice_id    uuid,
    created_by    uuid,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((status IN ('quoted', 'invoiced')) = (invoice_id IS NOT NULL)),
    CHECK ((source = 'usage') = (period IS NOT NULL AND source_ref IS NOT NULL))
);
CREATE INDEX charges_by_org ON charges (org_id, created_at DESC, id DESC);
CREATE INDEX charges_pending ON charges (org_id, created_at, id) WHERE status = 'pending';
CREATE INDEX charges_to_run ON charges (period, org_id) WHERE status = 'pending' AND source = 'usage';

-- The last number given per distributor entity, kind and year. The issuing
-- transaction takes the next numbers by updating its row (which it holds until
-- it commits): a rolled-back issue gives its numbers back, so there are no gaps.
CREATE TABLE document_counters (
    distributor_id  uuid NOT NULL REFERENCES distributors (id),
    kind            text NOT NULL CHECK (kind IN ('invoice', 'proforma')),
    year            integer NOT NULL,
    last            bigint NOT NULL CHECK (last >= 0),
    PRIMARY KEY (distributor_id, kind, year)
);

-- One run per period; its counts are read from the invoices it issued
-- (invoices.run_id), so replicas working on one run never contend on a row.
CREATE TABLE billing_runs (
    id           uuid PRIMARY KEY,
    period       text NOT NULL UNIQUE CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
    status       text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done')),
    started_by   uuid,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);

-- Issued documents. Their status is derived (a generated column): void once
-- voided_at is set, else from paid_minor against total_minor. Nothing but
-- paid_minor, paid_at, voided_at, converted_to and legal_document_url ever
-- changes after the insert (trigger below), and lines are insert-only.
CREATE TABLE invoices (
    id                  uuid PRIMARY KEY,
    org_id              uuid NOT NULL REFERENCES organizations (id),
    distributor_id      uuid NOT NULL REFERENCES distributors (id),
    kind                text NOT NULL CHECK (kind IN ('invoice', 'proforma')),
    number              text NOT NULL,
    currency            text NOT NULL CHECK (currency IN ('TRY', 'EUR', 'USD')),
    subtotal_minor      bigint NOT NULL CHECK (subtotal_minor > 0),
    tax_minor           bigint NOT NULL DEFAULT 0 CHECK (tax_minor = 0),
    total_minor         bigint NOT NULL,
    paid_minor          bigint NOT NULL DEFAULT 0,
    status              text GENERATED ALWAYS AS (
                            CASE WHEN voided_at IS NOT NULL THEN 'void'
                                 WHEN paid_minor = 0 THEN 'issued'
                                 WHEN paid_minor < total_minor THEN 'partially_paid'
                                 ELSE 'paid' END) STORED,
    issued_at           timestamptz NOT NULL,
    due_at              timestamptz,
    paid_at             timestamptz,
    voided_at           timestamptz,
    legal_document_url  text CHECK (legal_document_url LIKE 'https://%'),
    -- A converted proforma: the invoice made from it.
    converted_to        uuid REFERENCES invoices (id),
    run_id              uuid REFERENCES billing_runs (id),
    created_by          uuid,
    CHECK (total_minor = subtotal_minor + tax_minor),
    CHECK (paid_minor >= 0 AND paid_minor <= total_minor),
    CHECK ((paid_at IS NOT NULL) = (paid_minor = total_minor)),
    CHECK (voided_at IS NULL OR paid_minor = 0),
    CHECK (kind = 'proforma' OR converted_to IS NULL),
    -- Each entity numbers its documents in its own sequences.
    UNIQUE (distributor_id, number)
);
CREATE INDEX invoices_by_org ON invoices (org_id, issued_at DESC, id DESC);
CREATE INDEX invoices_by_distributor ON invoices (distributor_id, issued_at DESC, id DESC);
CREATE INDEX invoices_by_run ON invoices (run_id) WHERE run_id IS NOT NULL;

CREATE FUNCTION keep_invoice_issued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.org_id, NEW.distributor_id, NEW.kind, NEW.number, NEW.currency,
        NEW.subtotal_minor, NEW.tax_minor, NEW.total_minor, NEW.issued_at, NEW.due_at,
        NEW.run_id, NEW.created_by)
       IS DISTINCT FROM
       (OLD.id, OLD.org_id, OLD.distributor_id, OLD.kind, OLD.number, OLD.currency,
        OLD.subtotal_minor, OLD.tax_minor, OLD.total_minor, OLD.issued_at, OLD.due_at,
        OLD.run_id, OLD.created_by) THEN
        RAISE EXCEPTION 'an issued document is immutable (invoice %)', OLD.id;
    END IF;
    IF OLD.voided_at IS NOT NULL AND NEW IS DISTINCT FROM OLD THEN
        RAISE EXCEPTION 'a void document does not change (invoice %)', OLD.id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER invoices_immutable BEFORE UPDATE ON invoices
    FOR EACH ROW EXECUTE FUNCTION keep_invoice_issued();
CREATE TRIGGER invoices_not_deleted BEFORE DELETE ON invoices
    FOR EACH ROW EXECUTE FUNCTION forbid_ledger_change();

CREATE TABLE invoice_lines (
    invoice_id    uuid NOT NULL REFERENCES invoices (id),
    position      integer NOT NULL CHECK (position > 0),
    charge_id     uuid REFERENCES charges (id),
    description   text NOT NULL,
    brand         text NOT NULL,
    qty           integer NOT NULL CHECK (qty > 0),
    unit_minor    bigint NOT NULL CHECK (unit_minor >= 0),
    amount_minor  bigint NOT NULL CHECK (amount_minor > 0),
    PRIMARY KEY (invoice_id, position)
);
CREATE TRIGGER invoice_lines_append_only BEFORE UPDATE OR DELETE ON invoice_lines
    FOR EACH ROW EXECUTE FUNCTION forbid_ledger_change();

-- Money received (recorded by staff, or by approving a claim). applied_minor
-- went to the invoice; the rest (all of it when unallocated) was credited to
-- the wallet in the same transaction, as ledger row wallet_transaction_id.
CREATE TABLE payments (
    id                     uuid PRIMARY KEY,
    org_id                 uuid NOT NULL REFERENCES organizations (id),
    invoice_id             uuid REFERENCES invoices (id),
    amount_minor           bigint NOT NULL CHECK (amount_minor > 0),
    currency               text NOT NULL CHECK (currency IN ('TRY', 'EUR', 'USD')),
    method                 text NOT NULL CHECK (method IN ('bank_transfer', 'manual', 'other')),
    reference              text NOT NULL DEFAULT '',
    received_at            date NOT NULL,
    note                   text NOT NULL DEFAULT '',
    applied_minor          bigint NOT NULL CHECK (applied_minor >= 0 AND applied_minor <= amount_minor),
    wallet_transaction_id  bigint REFERENCES wallet_transactions (id),
    claim_id               uuid UNIQUE,
    created_by             uuid,
    created_at             timestamptz NOT NULL DEFAULT now(),
    CHECK (invoice_id IS NOT NULL OR applied_minor = 0),
    CHECK ((applied_minor < amount_minor) = (wallet_transaction_id IS NOT NULL))
);
CREATE INDEX payments_by_org ON payments (org_id, received_at DESC, created_at DESC, id DESC);
CREATE INDEX payments_by_invoice ON payments (invoice_id) WHERE invoice_id IS NOT NULL;
CREATE TRIGGER payments_append_only BEFORE UPDATE OR DELETE ON payments
    FOR EACH ROW EXECUTE FUNCTION forbid_ledger_change();

-- An invoice paid from the wallet: the debit is ledger row wallet_transaction_id.
CREATE TABLE wallet_settlements (
    id                     uuid PRIMARY KEY,
    invoice_id             uuid NOT NULL REFERENCES invoices (id),
    org_id                 uuid NOT NULL REFERENCES organizations (id),
    amount_minor           bigint NOT NULL CHECK (amount_minor > 0),
    wallet_transaction_id  bigint NOT NULL UNIQUE REFERENCES wallet_transactions (id),
    created_by             uuid,
    created_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wallet_settlements_by_invoice ON wallet_settlements (invoice_id);
CREATE TRIGGER wallet_settlements_append_only BEFORE UPDATE OR DELETE ON wallet_settlements
    FOR EACH ROW EXECUTE FUNCTION forbid_ledger_change();

-- A transfer a finance member says they made; staff approve it (recording the
-- payment in the same transaction) or reject it with notes the customer sees.
CREATE TABLE payment_claims (
    id            uuid PRIMARY KEY,
    org_id        uuid NOT NULL REFERENCES organizations (id),
    invoice_id    uuid REFERENCES invoices (id),
    amount_minor  bigint NOT NULL CHECK (amount_minor > 0),
    currency      text NOT NULL CHECK (currency IN ('TRY', 'EUR', 'USD')),
    reference     text NOT NULL,
    note          text NOT NULL DEFAULT '',
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    review_notes  text NOT NULL DEFAULT '',
    payment_id    uuid REFERENCES payments (id),
    created_by    uuid NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    reviewed_by   uuid,
    reviewed_at   timestamptz,
    CHECK ((status = 'pending') = (reviewed_at IS NULL)),
    CHECK ((status = 'approved') = (payment_id IS NOT NULL))
);
CREATE INDEX payment_claims_by_org ON payment_claims (org_id, created_at DESC, id DESC);
CREATE INDEX payment_claims_queue ON payment_claims (created_at, id) WHERE status = 'pending';
