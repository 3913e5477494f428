-- The idempotency ledger: one row per (scope, key) of a command that changed
-- state. The row, the state change and any River job it enqueues commit in
-- one transaction, so a recorded response always describes a mutation that
-- happened, and a mutation always has its recorded response.
--
-- scope separates key spaces (the command API, each workflow's webhook
-- keys, automatic commands); request_hash detects a key reused for a
-- different request; response is the exact bytes first sent, replayed byte
-- for byte. A row is live until expires_at; after that its key may be reused
-- and the cleanup job deletes it.
CREATE TABLE rflow.idempotency_keys (
    scope           text        NOT NULL,
    key             text        NOT NULL,
    request_hash    text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending',
    response_status integer,
    response        bytea,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key),
    CONSTRAINT idempotency_keys_status CHECK (status IN ('pending', 'completed')),
    CONSTRAINT idempotency_keys_completed CHECK (status = 'pending' OR response_status IS NOT NULL)
);

-- The cleanup job's path: expired rows, oldest first, in bounded batches.
CREATE INDEX idempotency_keys_expires ON rflow.idempotency_keys (expires_at);
