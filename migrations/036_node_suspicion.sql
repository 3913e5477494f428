-- A node whose liveness lock is free is first suspected (suspect_since) and
-- judged dead only once it stays free past the grace, or at once when its
-- process is provably gone (same host and pid namespace, no such pid): a
-- live process whose connections were cut (pg_terminate_backend, a proxy
-- reset) takes its lock again within a second and clears the suspicion,
-- so its steps in flight are never rescued into a second, concurrent run.
ALTER TABLE rflow.nodes
    ADD COLUMN suspect_since timestamptz,
    ADD COLUMN host_identity text NOT NULL DEFAULT '';
