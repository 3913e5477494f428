-- A standby takes over the trigger role of its own project as soon as no
-- process of that project that runs triggers is alive, whatever else is:
-- each node records its project and whether it runs triggers (a
-- --workers-only process does not). Nodes of older versions record neither
-- (project ''): a standby counts them as its project's, to be safe.
ALTER TABLE rflow.nodes
    ADD COLUMN project  text    NOT NULL DEFAULT '',
    ADD COLUMN triggers boolean NOT NULL DEFAULT true;
