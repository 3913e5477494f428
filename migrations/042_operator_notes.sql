-- What operators say and where they look: the reason given to
-- `rflow runs cancel --reason` is kept with the run (shown by runs show and
-- -o json), and each process records the console URL it serves, so
-- `rflow status` can say where to open it. Rows of older versions have
-- neither (NULL / '').
ALTER TABLE rflow.workflow_runs ADD COLUMN cancel_reason text;
ALTER TABLE rflow.nodes ADD COLUMN console_url text NOT NULL DEFAULT '';
