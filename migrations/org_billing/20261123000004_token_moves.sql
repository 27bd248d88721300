-- AI tokens through the same group commit as wallet moves, and each member's
-- AI settings in an organization (MemberDetail: ai_enabled, token_limit,
-- tokens_spent).

-- A member without a row has the defaults: AI enabled, no personal limit,
-- nothing spent. The row appears on the first spend or settings change.
CREATE TABLE member_ai (
    org_id        uuid NOT NULL REFERENCES organizations (id),
    user_id       uuid NOT NULL,
    ai_enabled    boolean NOT NULL DEFAULT true,
    token_limit   bigint CHECK (token_limit IS NULL OR token_limit >= 0),
    tokens_spent  bigint NOT NULL DEFAULT 0 CHECK (tokens_spent >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);

-- Token moves in one call: grants (p_member NULL) and spends attributed to a
-- member (p_member set: their AI must be enabled and their personal limit must
-- hold the spend, and their tokens_spent grows with it). Organizations are
-- locked in id order, a member row only while its organization's row is held,
-- so batches never deadlock. Each move is checked against the running balance
-- in arrival order; an accepted move appends its ledger row and its audit
-- event (with transaction_id and balance_after filled in).
CREATE FUNCTION apply_token_moves(
    p_org uuid[], p_delta bigint[], p_kind text[], p_reason text[], p_actor uuid[],
    p_member uuid[], p_event_id uuid[], p_subject text[], p_payload text[], p_traceparent text[])
RETURNS TABLE (ord bigint, outcome text, balance_after bigint, transaction_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m          record;
    cur_org    uuid;
    have       boolean := false;
    start_bal  bigint;
    bal        bigint;
    allowed    boolean;
    acc_id     bigint[] := '{}';
    acc_ord    bigint[] := '{}';
    acc_bal    bigint[] := '{}';
BEGIN
    FOR m IN
        SELECT u.o, u.d, u.i, p_member[u.i] AS mem
        FROM unnest(p_org, p_delta) WITH ORDINALITY AS u(o, d, i)
        ORDER BY u.o, u.i
    LOOP
        IF cur_org IS DISTINCT FROM m.o THEN
            IF have AND bal <> start_bal THEN
                UPDATE token_balances SET balance = bal, updated_at = now() WHERE org_id = cur_org;
            END IF;
            cur_org := m.o;
            SELECT t.balance INTO bal FROM token_balances t WHERE t.org_id = m.o FOR UPDATE;
            have := FOUND;
            start_bal := bal;
        END IF;
        ord := m.i;
        balance_after := NULL; transaction_id := NULL;
        IF NOT have THEN
            outcome := 'not_found';
        ELSIF bal::numeric + m.d < 0 THEN
            outcome := 'below_zero';
        ELSIF bal::numeric + m.d > 9223372036854775807 THEN
            outcome := 'overflow';
        ELSE
            outcome := 'applied';
            IF m.mem IS NOT NULL THEN
                INSERT INTO member_ai (org_id, user_id) VALUES (m.o, m.mem)
                    ON CONFLICT (org_id, user_id) DO NOTHING;
                SELECT CASE
                         WHEN NOT a.ai_enabled THEN 'ai_disabled'
                         WHEN a.token_limit IS NOT NULL
                              AND a.tokens_spent::numeric - m.d > a.token_limit THEN 'member_limit'
                         ELSE 'applied' END
                    INTO outcome
                    FROM member_ai a WHERE a.org_id = m.o AND a.user_id = m.mem FOR UPDATE;
                IF outcome = 'applied' THEN
                    UPDATE member_ai SET tokens_spent = tokens_spent - m.d, updated_at = now()
                        WHERE org_id = m.o AND user_id = m.mem;
                END IF;
            END IF;
            IF outcome = 'applied' THEN
                bal := bal + m.d;
                transaction_id := nextval('token_transactions_id_seq');
                acc_id := acc_id || transaction_id;
                acc_ord := acc_ord || m.i;
                acc_bal := acc_bal || bal;
                balance_after := bal;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF have AND bal <> start_bal THEN
        UPDATE token_balances SET balance = bal, updated_at = now() WHERE org_id = cur_org;
    END IF;
    INSERT INTO token_transactions (id, org_id, delta, balance_after, kind, reason, actor_user_id)
        SELECT a.id, p_org[a.i], p_delta[a.i], a.b, p_kind[a.i], p_reason[a.i], p_actor[a.i]
        FROM unnest(acc_id, acc_ord, acc_bal) AS a(id, i, b);
    INSERT INTO outbox (id, subject, payload, traceparent)
        SELECT p_event_id[a.i], p_subject[a.i],
               jsonb_set(jsonb_set(p_payload[a.i]::jsonb, '{data,detail,transaction_id}', to_jsonb(a.id)),
                         '{data,detail,balance}', to_jsonb(a.b))::text,
               p_traceparent[a.i]
        FROM unnest(acc_id, acc_ord, acc_bal) AS a(id, i, b);
END $$;

-- The agent looks organizations up by name (exact or prefix, case-insensitive).
CREATE INDEX organizations_by_lower_name ON organizations (lower(name) text_pattern_ops);
