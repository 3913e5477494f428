-- Spend budgets (seed 000, "Durable spend budgets survive restarts and
-- races"). A budget row is declared per (workflow, name, asset) when the
-- workflow is deployed; it is also the per-(budget, asset) lock a send takes
-- before it checks the cap, so racing sends are serialised on it.
CREATE TABLE rflow.budgets (
    workflow_name text          NOT NULL,
    name          text          NOT NULL,
    asset         text          NOT NULL,
    cap           numeric(78,0) NOT NULL CHECK (cap > 0),
    cap_text      text          NOT NULL,
    span          interval      NOT NULL CHECK (span > interval '0'),
    updated_at    timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_name, name, asset)
);

-- One reservation per send attempt and asset, keyed by the send's
-- idempotency external_id: a re-run of the same attempt finds its row, so a
-- double reserve is one row, not double spend. reserved and spent count
-- against the cap inside the rolling window (reserved_at); released does not.
CREATE TABLE rflow.budget_reservations (
    external_id   text          NOT NULL,
    asset         text          NOT NULL,
    workflow_name text          NOT NULL,
    budget        text          NOT NULL,
    amount        numeric(78,0) NOT NULL CHECK (amount >= 0),
    status        text          NOT NULL DEFAULT 'reserved'
        CHECK (status IN ('reserved', 'spent', 'released')),
    run_id        uuid,
    step_key      text,
    attempt       integer,
    reserved_at   timestamptz   NOT NULL DEFAULT now(),
    settled_at    timestamptz,
    PRIMARY KEY (external_id, asset),
    FOREIGN KEY (workflow_name, budget, asset) REFERENCES rflow.budgets (workflow_name, name, asset) ON DELETE CASCADE
);
CREATE INDEX budget_reservations_window ON rflow.budget_reservations (workflow_name, budget, asset, reserved_at)
    WHERE status <> 'released';
