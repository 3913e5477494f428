-- Command identity that outlives the idempotency ledger.
--
-- A deploy through PUT /v1/workflows/{name} records its Idempotency-Key (in
-- canonical form) and request hash with the generation it left current, so
-- an exact replay after the ledger row expired answers with that generation
-- instead of deploying again, and the same key with another definition is
-- still a conflict. A retry through POST /v1/runs/{id}/retry records the
-- attempt it started, so a late replay never retries the run a second time.
-- (Manual runs keep theirs in workflow_runs: the trigger key and the trigger
-- payload; a cancel is idempotent in its effect.)
CREATE TABLE rflow.workflow_deploys (
    workflow_name text        NOT NULL REFERENCES rflow.workflows (name) ON DELETE CASCADE,
    command_key   text        NOT NULL,
    request_hash  text        NOT NULL,
    generation    bigint      NOT NULL,
    changed       boolean     NOT NULL,
    previous_generation bigint NOT NULL DEFAULT 0,
    same_spec_as  bigint      NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_name, command_key)
);

CREATE TABLE rflow.run_retries (
    run_id       uuid        NOT NULL REFERENCES rflow.workflow_runs (id) ON DELETE CASCADE,
    command_key  text        NOT NULL,
    request_hash text        NOT NULL,
    attempt      integer     NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, command_key)
);

-- Idempotency-Keys that spell a UUID are now stored canonically (lower case,
-- dashed), so every spelling of one UUID is one key. Rows recorded before
-- under another spelling move to the canonical key; where several spellings
-- of one UUID were recorded, the oldest moves and the others stay under
-- their exact spelling, which still answers for that spelling until it
-- expires (store.LedgerClaim.Spelling).
WITH spelled AS (
    SELECT scope, key, created_at,
           regexp_replace(key, '^urn:uuid:', '', 'i')::uuid::text AS canonical
    FROM rflow.idempotency_keys
    WHERE scope = 'v1'
      AND (key ~* '^(urn:uuid:)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
        OR key ~* '^\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}$'
        OR key ~* '^[0-9a-f]{32}$')
), moving AS (
    SELECT DISTINCT ON (scope, canonical) scope, key, canonical
    FROM spelled
    WHERE key <> canonical
      AND NOT EXISTS (SELECT 1 FROM rflow.idempotency_keys k
                      WHERE k.scope = spelled.scope AND k.key = spelled.canonical)
    ORDER BY scope, canonical, created_at
)
UPDATE rflow.idempotency_keys k SET key = m.canonical
FROM moving m
WHERE k.scope = m.scope AND k.key = m.key;
