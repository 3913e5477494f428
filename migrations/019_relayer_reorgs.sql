-- Sends across reorgs. A receipt whose block left the canonical chain is
-- kept here before the send is tracked again, so the journal shows every
-- block a send was ever mined in, not only the one it ended in.
CREATE TABLE relayer.orphaned_receipts (
    tx_id        uuid        NOT NULL REFERENCES relayer.transactions (tx_id) ON DELETE CASCADE,
    hash         text        NOT NULL,
    block_number bigint      NOT NULL,
    block_hash   text        NOT NULL,
    detected_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tx_id, block_hash, hash)
);

-- When the send last lost its block: the fee-bump clock restarts there, so
-- a send re-broadcast after a reorg gets BumpAfter before it is re-signed.
ALTER TABLE relayer.transactions ADD COLUMN orphaned_at timestamptz;
