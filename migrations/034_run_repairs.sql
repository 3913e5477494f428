-- A run whose pending step lost its River job (deleted in River UI, lost in
-- a restore) is re-enqueued at its journal position by the repair scan
-- (jobs.Engine.RepairRuns). Each repair is a row here, so `rflow runs show`
-- says which step was repaired and when. Repairs are rare: the foreign key
-- costs nothing on the claim path, and retention deletes them with the run.
CREATE TABLE rflow.run_repairs (
    run_id      uuid        NOT NULL REFERENCES rflow.workflow_runs (id) ON DELETE CASCADE,
    journal     text        NOT NULL DEFAULT 'run' CHECK (journal IN ('run', 'reorg')),
    response_id uuid,
    step_key    text        NOT NULL,
    attempt     integer     NOT NULL,
    repaired_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_repairs_run ON rflow.run_repairs (run_id);
