-- The per-organization server cap (orders.max_servers_per_org): each
-- organization's live servers (neither terminated nor failed, the servers
-- that hold their hostname), counted by the database itself so that every
-- path and every binary version keeps it exact. An order batch reads its
-- organizations' rows after its INSERT has counted them (the INSERT trigger
-- takes their row locks, held to commit), so two concurrent orders of one
-- organization never both pass the cap; no order counts servers.
-- Servers written by a replica of the previous version between the count below
-- and the triggers' creation would be counted by neither: no write reaches
-- servers from here to this migration's commit (reads go on).
LOCK TABLE servers IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE org_servers (
    org_id  uuid PRIMARY KEY,
    live    integer NOT NULL
);

INSERT INTO org_servers (org_id, live)
SELECT org_id, count(*) FROM servers
 WHERE status NOT IN ('terminated', 'failed') GROUP BY org_id;

-- New servers: one grouped upsert per statement (an order batch is one).
CREATE FUNCTION org_servers_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO org_servers (org_id, live)
    SELECT org_id, count(*) FROM new_servers
     WHERE status NOT IN ('terminated', 'failed')
     GROUP BY org_id ORDER BY org_id
    ON CONFLICT (org_id) DO UPDATE SET live = org_servers.live + EXCLUDED.live;
    RETURN NULL;
END
$$;

CREATE TRIGGER servers_counted_on_insert AFTER INSERT ON servers
    REFERENCING NEW TABLE AS new_servers
    FOR EACH STATEMENT EXECUTE FUNCTION org_servers_inserted();

-- Servers removed (an order refused by the cap inside its own batch).
CREATE FUNCTION org_servers_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE org_servers c SET live = c.live - d.n
      FROM (SELECT org_id, count(*) AS n FROM old_servers
             WHERE status NOT IN ('terminated', 'failed') GROUP BY org_id) d
     WHERE c.org_id = d.org_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER servers_counted_on_delete AFTER DELETE ON servers
    REFERENCING OLD TABLE AS old_servers
    FOR EACH STATEMENT EXECUTE FUNCTION org_servers_deleted();

-- A server leaving the live states (terminated, failed) or changing
-- organization (transfer). Row-level with a WHEN clause: other updates
-- (credentials, provider references, power) call nothing.
CREATE FUNCTION org_servers_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A transfer locks both organizations' rows in one order (by id), as
    -- order batches do: two opposite transfers never deadlock.
    IF OLD.org_id IS DISTINCT FROM NEW.org_id THEN
        PERFORM 1 FROM org_servers WHERE org_id IN (OLD.org_id, NEW.org_id)
         ORDER BY org_id FOR UPDATE;
    END IF;
    IF OLD.status NOT IN ('terminated', 'failed') THEN
        UPDATE org_servers SET live = live - 1 WHERE org_id = OLD.org_id;
    END IF;
    IF NEW.status NOT IN ('terminated', 'failed') THEN
        INSERT INTO org_servers (org_id, live) VALUES (NEW.org_id, 1)
        ON CONFLICT (org_id) DO UPDATE SET live = org_servers.live + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER servers_counted_on_update AFTER UPDATE ON servers
    FOR EACH ROW
    WHEN (OLD.org_id IS DISTINCT FROM NEW.org_id
          OR (OLD.status NOT IN ('terminated', 'failed'))
             IS DISTINCT FROM (NEW.status NOT IN ('terminated', 'failed')))
    EXECUTE FUNCTION org_servers_moved();
