-- apply_wallet_moves, with the outcome 'overflow' for a credit that would take
-- the balance past bigint (it was reported as 'below_zero'). Otherwise as in
-- 20261122000004_wallet_moves.sql.
CREATE OR REPLACE FUNCTION apply_wallet_moves(
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
    -- The accepted moves: ledger id, position in the input, balance after.
    acc_id     bigint[] := '{}';
    acc_ord    bigint[] := '{}';
    acc_bal    bigint[] := '{}';
BEGIN
    FOR m IN
        SELECT u.o, u.d, u.i FROM unnest(p_org, p_delta) WITH ORDINALITY AS u(o, d, i)
        ORDER BY u.o, u.i
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
        ELSIF bal::numeric + m.d < 0 THEN
            outcome := 'below_zero';
        ELSIF bal::numeric + m.d > 9223372036854775807 THEN
            outcome := 'overflow';
        ELSE
            bal := bal + m.d;
            transaction_id := nextval('wallet_transactions_id_seq');
            acc_id := acc_id || transaction_id;
            acc_ord := acc_ord || m.i;
            acc_bal := acc_bal || bal;
            outcome := 'applied'; balance_after := bal; currency := cur;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF have AND bal <> start_bal THEN
        UPDATE wallets SET balance_minor = bal, updated_at = now() WHERE org_id = cur_org;
    END IF;
    INSERT INTO wallet_transactions (id, org_id, delta_minor, balance_after, kind, note, actor_user_id)
        SELECT a.id, p_org[a.i], p_delta[a.i], a.b, p_kind[a.i], p_note[a.i], p_actor[a.i]
        FROM unnest(acc_id, acc_ord, acc_bal) AS a(id, i, b);
    INSERT INTO outbox (id, subject, payload, traceparent)
        SELECT p_event_id[a.i], p_subject[a.i],
               jsonb_set(jsonb_set(p_payload[a.i]::jsonb, '{data,detail,transaction_id}', to_jsonb(a.id)),
                         '{data,detail,balance_after_minor}', to_jsonb(a.b))::text,
               p_traceparent[a.i]
        FROM unnest(acc_id, acc_ord, acc_bal) AS a(id, i, b);
END $$;
