-- The unit a budget's amounts are shown in ({"symbol", "decimals", "base"}:
-- the network's currency for a native budget, the contract's token: for an
-- ERC-20 one), recorded when the workflow is deployed so `rflow budgets ls`
-- reads it from the database alone. NULL (a budget declared before this
-- migration, until its next deploy) shows native budgets in ETH and token
-- budgets as raw integers.
ALTER TABLE rflow.budgets ADD COLUMN unit jsonb;
