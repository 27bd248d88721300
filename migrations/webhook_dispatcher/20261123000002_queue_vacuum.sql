-- deliveries is a queue: every attempt updates a row's indexed columns, which
-- leaves dead index entries at the head of `deliveries_due`. Vacuum it after
-- every few thousand changes instead of after a fifth of the table.
ALTER TABLE deliveries SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_analyze_scale_factor = 0.05
);
