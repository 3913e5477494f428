-- The identity of each chain the indexer has read: its genesis hash, and
-- the network name it was last read as (for messages). The head tracker
-- compares it with the node at every start: a different genesis under the
-- same chain id is another chain (a restarted dev node), whose window and
-- cursors must not carry over.
CREATE TABLE indexer.chains (
    chain_id     bigint      PRIMARY KEY,
    network      text        NOT NULL,
    genesis_hash text        NOT NULL,
    seen_at      timestamptz NOT NULL DEFAULT now()
);
