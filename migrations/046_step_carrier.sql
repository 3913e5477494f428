-- A step carried inline by the River job of the step before it (jobs:
-- inline continuation) has no River job of its own: carrier_job names the
-- job that carries it. A job that is rescued after a crash looks up the
-- pending step it carries here; the repair scan counts a carrier that is
-- not completed as the step's live job; the console links it. NULL for a
-- step with a job of its own. Reorg responses' steps are never carried, but
-- both journals share their column list.
ALTER TABLE rflow.step_runs ADD COLUMN carrier_job bigint;
ALTER TABLE rflow.reorg_step_runs ADD COLUMN carrier_job bigint;

-- Whether a process knows carriers. A process of an older version does not:
-- its repair scan would take a carried step for one whose job was lost and
-- enqueue it, so no process carries while such a process is registered. Its
-- rows, and rows it inserts after this migration, get the default.
ALTER TABLE rflow.nodes ADD COLUMN knows_carriers boolean NOT NULL DEFAULT false;
