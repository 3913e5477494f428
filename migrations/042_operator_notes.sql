-- What operators say, where they look, and what they need without the
-- project's files:
-- * the reason given to `rflow runs cancel --reason` is kept with the run
--   (runs show and -o json show it);
-- * each process records the console URL it serves, so `rflow status` can
--   say where to open it;
-- * the project's source files as last deployed (rflow.yaml, its includes
--   and ABIs, ${VAR} references unexpanded), so `rflow runs retry` and
--   `rflow workflows resume` work where those files are not.
-- Rows of older versions have none of these (NULL / '' / no row).
ALTER TABLE rflow.workflow_runs ADD COLUMN cancel_reason text;
ALTER TABLE rflow.nodes ADD COLUMN console_url text NOT NULL DEFAULT '';
CREATE TABLE rflow.project_sources (
    project     text        PRIMARY KEY,
    main        text        NOT NULL,   -- the project file's path among files
    files       jsonb       NOT NULL,
    deployed_at timestamptz NOT NULL DEFAULT now()
);
