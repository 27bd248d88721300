-- Apply a batch of wallet moves in one call, in the caller's transaction (or in
-- the statement's own). Input: parallel arrays, one element per move, in arrival
-- order. Output: one row per move (ord = its 1-based position) with its outcome:
--   'applied'    balance_after, currency and transaction_id are set;
--   'below_zero' the move would take the balance below zero (or past bigint);
--   'not_found'  there is no such wallet.
-- Moves are taken wallet by wallet in wallet id order, so that every batch locks
-- its wallets in the same order and two batches never deadlock; within a wallet
-- they apply in arrival order against the running balance, each accepted move
-- appending its ledger row (ids from the sequence, so in order) with the balance
-- after it, and its audit event to the outbox (with detail.transaction_id and
-- detail.balance_after_minor added). Each wallet's balance is written
-- once, at its final value. A refused move changes nothing.
CREATE FUNCTION apply_wallet_moves(
    p_org uuid[], p_delta bigint[], p_kind text[], p_note text[], p_actor uuid[],
    p_event_id uuid[], p_subject text[], p_payload text[], p_traceparent text[])
RETURNS TABLE (ord bigint, outcome text, balance_after bigint, currency text, transaction_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    m          record;
    cur_org    uuid;
    have       boolean := false;
    start_bal  bigint;
    bal        bigint;
    cur        text;
BEGIN
    FOR m IN
        SELECT * FROM unnest(p_org, p_delta, p_kind, p_note, p_actor, p_event_id, p_subject,
                             p_payload, p_traceparent)
                 WITH ORDINALITY AS u(o, d, k, n, a, e, s, p, t, i)
        ORDER BY o, i
    LOOP
        IF cur_org IS DISTINCT FROM m.o THEN
            IF have AND bal <> start_bal THEN
                UPDATE wallets SET balance_minor = bal, updated_at = now() WHERE org_id = cur_org;
            END IF;
            cur_org := m.o;
            SELECT w.balance_minor, w.currency INTO bal, cur
                FROM wallets w WHERE w.org_id = m.o FOR UPDATE;
            have := FOUND;
            start_bal := bal;
        END IF;
        ord := m.i;
        balance_after := NULL; currency := NULL; transaction_id := NULL;
        IF NOT have THEN
            outcome := 'not_found';
        ELSIF bal::numeric + m.d NOT BETWEEN 0 AND 9223372036854775807 THEN
            outcome := 'below_zero';
        ELSE
            bal := bal + m.d;
            INSERT INTO wallet_transactions (org_id, delta_minor, balance_after, kind, note, actor_user_id)
                VALUES (m.o, m.d, bal, m.k, m.n, m.a) RETURNING id INTO transaction_id;
            -- The audit event names the ledger row it created and the balance after it.
            INSERT INTO outbox (id, subject, payload, traceparent) VALUES (m.e, m.s,
                jsonb_set(jsonb_set(m.p::jsonb, '{data,detail,transaction_id}', to_jsonb(transaction_id)),
                          '{data,detail,balance_after_minor}', to_jsonb(bal))::text,
                m.t);
            outcome := 'applied'; balance_after := bal; currency := cur;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF have AND bal <> start_bal THEN
        UPDATE wallets SET balance_minor = bal, updated_at = now() WHERE org_id = cur_org;
    END IF;
END $$;
