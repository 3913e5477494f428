package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Claim is one trigger occurrence asking for a run. TriggerKey is its
// deterministic identity (see the reliability contract): the claim gate lets
// exactly one claim per (Workflow, TriggerKey) become a run.
type Claim struct {
	Workflow    string
	TriggerKey  string
	TriggerKind string // event, cron, block, read, webhook, manual
	Trigger     []byte // JSON payload exposed to expressions as `trigger`

	// Chain coordinates of the triggering log or block, when there is one;
	// reorg handling finds orphaned runs by them.
	ChainID     int64
	BlockNumber int64
	BlockHash   string
}

// ClaimedRun is a claim that won the gate.
type ClaimedRun struct {
	ID         uuid.UUID
	Index      int // position of the claim in the batch
	Workflow   string
	Generation int64
	// Paused runs wait in status queued with no job until the workflow is
	// resumed (see StartablePausedRuns).
	Paused bool
}

// ClaimRuns is the claim gate: it inserts one run per claim with
// INSERT … ON CONFLICT (workflow_name, trigger_key) DO NOTHING in tx and
// returns only the claims that created a run. Claims for unknown workflows
// are dropped; the run pins the workflow's current generation. Claims for a
// paused workflow still pass the gate (so nothing is lost) and are started
// on resume. The caller
// enqueues the first step in the same tx, so a run and its first job commit
// together or not at all.
func ClaimRuns(ctx context.Context, tx pgx.Tx, claims []Claim) ([]ClaimedRun, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	n := len(claims)
	ids := make([]uuid.UUID, n)
	wfs := make([]string, n)
	keys := make([]string, n)
	kinds := make([]string, n)
	payloads := make([]string, n)
	chainIDs := make([]*int64, n)
	blocks := make([]*int64, n)
	hashes := make([]*string, n)
	for i, c := range claims {
		ids[i] = uuid.Must(uuid.NewV7())
		wfs[i], keys[i], kinds[i] = c.Workflow, c.TriggerKey, c.TriggerKind
		payloads[i] = "{}"
		if len(c.Trigger) > 0 {
			payloads[i] = string(c.Trigger)
		}
		if c.ChainID != 0 {
			chainIDs[i], blocks[i] = &claims[i].ChainID, &claims[i].BlockNumber
			if c.BlockHash != "" {
				hashes[i] = &claims[i].BlockHash
			}
		}
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO rflow.workflow_runs
			(id, workflow_name, generation, trigger_key, trigger_kind, trigger, chain_id, block_number, block_hash)
		SELECT c.id, c.workflow, w.generation, c.key, c.kind, c.payload::jsonb, c.chain_id, c.block, c.hash
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[])
			WITH ORDINALITY AS c(id, workflow, key, kind, payload, chain_id, block, hash, ord)
		JOIN rflow.workflows w ON w.name = c.workflow
		ORDER BY c.ord
		ON CONFLICT (workflow_name, trigger_key) DO NOTHING
		RETURNING id, workflow_name, generation, (SELECT paused FROM rflow.workflows WHERE name = workflow_name)`,
		ids, wfs, keys, kinds, payloads, chainIDs, blocks, hashes)
	if err != nil {
		return nil, fmt.Errorf("claim %d run(s): %w", n, err)
	}
	index := make(map[uuid.UUID]int, n)
	for i, id := range ids {
		index[id] = i
	}
	var out []ClaimedRun
	var r ClaimedRun
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Workflow, &r.Generation, &r.Paused}, func() error {
		r.Index = index[r.ID]
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim %d run(s): %w", n, err)
	}
	return out, nil
}
