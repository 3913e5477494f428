-- Pruning never frees a trigger key: `rflow runs prune` keeps each pruned
-- run's (workflow, trigger key) here, and the claim gate claims no run for
-- a key that has one, so a re-walked block range, a cron catch-up or a
-- redelivered webhook after its run was pruned starts nothing. A row is a
-- few dozen bytes against a run's journal of kilobytes.
CREATE TABLE rflow.run_tombstones (
    workflow_name text        NOT NULL,
    trigger_key   text        NOT NULL,
    run_id        uuid        NOT NULL,
    pruned_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_name, trigger_key)
);
