-- no-transaction
-- Dropping a column (or blanking it) leaves the old values in the table's
-- files: in every row version written before (dead versions included) until
-- they happen to be overwritten. A full rewrite copies only the live rows,
-- with dropped columns as NULL, into new files and removes the old ones, so
-- that the plaintext legal identities sealed before the previous migration
-- are gone from the table. (VACUUM cannot run in a transaction, hence this
-- migration of its own; the table is locked while it runs, briefly.)
VACUUM FULL organizations;
