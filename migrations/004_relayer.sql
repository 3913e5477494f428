-- The embedded relayer: one row per send (keyed by the caller's external_id),
-- every hash ever broadcast for it, and the next nonce per wallet and chain.
-- Private keys never reach these tables.

-- One row per send attempt. external_id is the caller's idempotency key
-- (rflow:{run_id}:{step_id}:{attempt}); the UNIQUE constraint makes a repeated
-- queue a no-op. tx_id is the stable identity: gas bumps change the hash,
-- never the tx_id. Amounts are numeric(78,0) so any uint256 is exact.
CREATE TABLE relayer.transactions (
    id                  bigserial   PRIMARY KEY,
    tx_id               uuid        NOT NULL UNIQUE,
    external_id         text        NOT NULL,
    wallet              text        NOT NULL,
    chain_id            bigint      NOT NULL,
    from_address        text        NOT NULL,
    to_address          text        NOT NULL,
    value               numeric(78,0) NOT NULL DEFAULT 0 CHECK (value >= 0),
    data                bytea       NOT NULL DEFAULT '\x',
    nonce               bigint,
    gas_limit           bigint,
    max_fee             numeric(78,0),
    max_priority_fee    numeric(78,0),
    gas_price           numeric(78,0),
    fee_cap             numeric(78,0),
    status              text        NOT NULL DEFAULT 'pending',
    tx_hash             text,
    mined_block         bigint,
    mined_block_hash    text,
    receipt_status      smallint,
    gas_used            bigint,
    error               text,
    confirmations       integer     NOT NULL DEFAULT 1 CHECK (confirmations >= 0),
    dry_run             boolean     NOT NULL DEFAULT false,
    simulation          jsonb,
    expires_at          timestamptz,
    cancel_requested_at timestamptz,
    -- The River job that currently drives this transaction. Workers fence
    -- their writes on it, so a duplicate or stale job changes nothing.
    job_id              bigint,
    checked_at          timestamptz NOT NULL DEFAULT now(),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    broadcast_at        timestamptz,
    mined_at            timestamptz,
    finished_at         timestamptz,
    CONSTRAINT transactions_external_id UNIQUE (external_id),
    CONSTRAINT transactions_status CHECK (status IN ('pending', 'in_mempool', 'mined', 'confirmed',
        'failed', 'expired', 'cancelled', 'replaced', 'dropped', 'simulated'))
);
-- Recovery scans in-flight transactions by how long ago a worker looked at them.
CREATE INDEX transactions_inflight ON relayer.transactions (checked_at)
    WHERE status IN ('pending', 'in_mempool', 'mined');
CREATE INDEX transactions_wallet_nonce ON relayer.transactions (from_address, chain_id, nonce);

-- Every signed transaction ever broadcast for a tx_id (the original, each
-- gas bump, a cancelling no-op). The signed bytes are kept so a dropped
-- transaction can be re-sent unchanged; they hold no secret.
CREATE TABLE relayer.broadcasts (
    hash             text        PRIMARY KEY,
    tx_id            uuid        NOT NULL REFERENCES relayer.transactions (tx_id) ON DELETE CASCADE,
    kind             text        NOT NULL CHECK (kind IN ('send', 'cancel')),
    nonce            bigint      NOT NULL,
    gas_limit        bigint      NOT NULL,
    max_fee          numeric(78,0),
    max_priority_fee numeric(78,0),
    gas_price        numeric(78,0),
    raw              bytea       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    sent_at          timestamptz
);
CREATE INDEX broadcasts_tx ON relayer.broadcasts (tx_id, created_at);

-- The next nonce to hand out per (wallet address, chain). A nonce is taken
-- under this row's lock and written to its transaction in the same database
-- transaction, before anything is signed.
CREATE TABLE relayer.nonces (
    address       text        NOT NULL,
    chain_id      bigint      NOT NULL,
    next_nonce    bigint      NOT NULL CHECK (next_nonce >= 0),
    reconciled_at timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (address, chain_id)
);
