-- A workflow the project file no longer has is retired by
-- `rflow workflows deploy`: its triggers stop, its runs in flight finish on
-- their generation, and it stays listed (retired_at). source says who
-- deployed the current generation: a project file ('file') or the API
-- ('api'); only file workflows are retired for missing from a file, since an
-- API deploy is not in any file by design. Generations deployed through the
-- API before this migration are known by their workflow_deploys record.
ALTER TABLE rflow.workflows
    ADD COLUMN source     text NOT NULL DEFAULT 'file' CHECK (source IN ('file', 'api')),
    ADD COLUMN retired_at timestamptz;

UPDATE rflow.workflows w SET source = 'api'
WHERE EXISTS (SELECT 1 FROM rflow.workflow_deploys d WHERE d.workflow_name = w.name AND d.generation = w.generation);
