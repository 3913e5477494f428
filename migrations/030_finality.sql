-- Finality tags (issue 26). The head tracker polls each chain's safe and
-- finalized blocks (eth_getBlockByNumber("safe" | "finalized")) and keeps
-- the newest answer here, one row per (chain, tag): a trigger phase of
-- run_on: safe | finalized follows the tag's block number, and a wait
-- with confirmations: safe | finalized settles once its candidate's block
-- is at or below it.
CREATE TABLE indexer.finality (
    chain_id bigint      NOT NULL,
    tag      text        NOT NULL CHECK (tag IN ('safe', 'finalized')),
    number   bigint      NOT NULL,
    hash     text        NOT NULL,
    seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, tag)
);

-- finality: the tag a wait settles under instead of its confirmations
-- (NULL: it settles at confirmations depth).
ALTER TABLE rflow.waits ADD COLUMN finality text CHECK (finality IN ('safe', 'finalized'));
