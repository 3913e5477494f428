package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rflow-dev/rflow/trigger"
)

// Claim is one trigger occurrence asking for a run. TriggerKey is its
// deterministic identity (see the reliability contract): the claim gate lets
// exactly one claim per (Workflow, TriggerKey) become a run.
type Claim struct {
	Workflow    string
	TriggerKey  string
	TriggerKind trigger.Kind
	Trigger     []byte // JSON payload exposed to expressions as `trigger`

	// LegacyKey, when set, is the key an earlier version gave the same
	// occurrence (an event's chain_id:tx_hash:log_index). A run claimed
	// under it in the same block (BlockHash) is this occurrence: the claim
	// gate moves it to TriggerKey instead of claiming a second run.
	LegacyKey string

	// Chain coordinates of the triggering log or block, when there is one;
	// reorg handling finds orphaned runs by them.
	ChainID     int64
	BlockNumber int64
	BlockHash   string

	// TriggerError, when set, says why the occurrence's trigger condition
	// (where:/when:) or its log's decoding failed. The run is claimed all
	// the same (nothing is dropped) and fails at once with this error.
	TriggerError string
}

// ManualClaim is the claim of a manual run with trigger key key. Its
// payload is {"input": input} (input null when empty) whether the CLI or the
// API asks, so the same key and input compare equal from either.
func ManualClaim(workflow, key string, input json.RawMessage) Claim {
	payload, err := json.Marshal(trigger.ManualPayload{Input: input})
	if err != nil {
		// input is not valid JSON: the callers validate it first; keep
		// the claim failing in the database rather than here.
		payload = []byte(`{"input": ` + string(input) + `}`)
	}
	return Claim{Workflow: workflow, TriggerKey: key, TriggerKind: trigger.Manual, Trigger: payload}
}

// ErrTriggerKeyReused matches a TriggerKeyConflict.
var ErrTriggerKeyReused = errors.New("trigger key already used with another input")

// TriggerKeyConflict is a manual run asked for with a key whose run was
// started with a different input: it is another request, not a replay, and
// starts nothing.
type TriggerKeyConflict struct {
	Workflow string
	Key      string
	// RunID is the run that holds the key.
	RunID uuid.UUID
}

func (e *TriggerKeyConflict) Error() string {
	return fmt.Sprintf("key %q of workflow %s already started run %s with a different input; "+
		"use a new key for a new run, or the same input to get that run", e.Key, e.Workflow, e.RunID)
}

// Is makes errors.Is(err, ErrTriggerKeyReused) match.
func (e *TriggerKeyConflict) Is(target error) bool { return target == ErrTriggerKeyReused }

// ClaimedRun is a claim that won the gate.
type ClaimedRun struct {
	ID         uuid.UUID
	Index      int // position of the claim in the batch
	Workflow   string
	Generation int64
	// Paused runs wait in status queued with no job until the workflow is
	// resumed (see StartablePausedRuns).
	Paused bool
	// Born is set when the run was inserted in the state its claim's Birth
	// planned: the caller writes its journal and job, never its row again.
	Born bool
}

// Birth is the state a claim's run is inserted in, planned before the gate
// by a caller that knows the run's first step parks (a delay): writing it
// in the INSERT spares rewriting every fresh row. It applies only when the
// workflow is still at Generation and not paused; otherwise the run is born
// queued as ever (ClaimedRun.Born false) and the caller plans it after the
// gate. A zero Birth (no ID) plans nothing.
type Birth struct {
	ID         uuid.UUID
	Generation int64
	Status     RunStatus // never RunQueued: that is every run's birth
	Position   string
	WakeAt     *time.Time
}

// ClaimRuns is the claim gate: it first moves runs claimed under an
// occurrence's legacy key to its key (see Claim.LegacyKey), then inserts one run per claim with
// INSERT … ON CONFLICT (workflow_name, trigger_key) DO NOTHING in tx and
// returns only the claims that created a run. Claims for unknown or
// retired workflows, and for keys whose run was pruned (a tombstone), are
// dropped; the run pins the workflow's current generation. Claims for a
// paused workflow still pass the gate (so nothing is lost) and are started
// on resume. The caller
// enqueues the first step in the same tx, so a run and its first job commit
// together or not at all.
func ClaimRuns(ctx context.Context, tx pgx.Tx, claims []Claim) ([]ClaimedRun, error) {
	return ClaimRunsBorn(ctx, tx, claims, nil)
}

// ClaimRunsBorn is ClaimRuns whose runs are inserted in the states births
// (nil, or one per claim) planned, where they still apply (see Birth).
func ClaimRunsBorn(ctx context.Context, tx pgx.Tx, claims []Claim, births []Birth) ([]ClaimedRun, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	if births != nil && len(births) != len(claims) {
		return nil, fmt.Errorf("claim %d run(s): %d births", len(claims), len(births))
	}
	if err := adoptLegacyKeys(ctx, tx, claims); err != nil {
		return nil, err
	}
	n := len(claims)
	ids := make([]uuid.UUID, n)
	raw := make([][16]byte, n) // uuid.UUID's driver.Valuer is a slow text round trip
	wfs := make([]string, n)
	keys := make([]string, n)
	kinds := make([]string, n)
	payloads := make([]string, n)
	chainIDs := make([]*int64, n)
	blocks := make([]*int64, n)
	hashes := make([]*string, n)
	gens := make([]*int64, n)
	statuses := make([]string, n)
	positions := make([]string, n)
	wakes := make([]*time.Time, n)
	for i, c := range claims {
		ids[i] = uuid.Must(uuid.NewV7())
		if births != nil && births[i].ID != uuid.Nil {
			b := &births[i]
			ids[i], gens[i], statuses[i], positions[i], wakes[i] = b.ID, &b.Generation, string(b.Status), b.Position, b.WakeAt
		}
		raw[i] = ids[i]
		wfs[i], keys[i], kinds[i] = c.Workflow, c.TriggerKey, string(c.TriggerKind)
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
	// A birth applies only to the generation it was planned from, and not
	// to a paused workflow (its runs wait queued for the resume).
	rows, err := tx.Query(ctx, `
		INSERT INTO rflow.workflow_runs
			(id, workflow_name, generation, trigger_key, trigger_kind, trigger, chain_id, block_number, block_hash,
			 status, position, wake_at)
		SELECT c.id, c.workflow, w.generation, c.key, c.kind, c.payload::jsonb, c.chain_id, c.block, c.hash,
			CASE WHEN born THEN c.status ELSE 'queued' END,
			CASE WHEN born THEN NULLIF(c.position, '') END,
			CASE WHEN born THEN c.wake_at END
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[],
				$9::bigint[], $10::text[], $11::text[], $12::timestamptz[])
			WITH ORDINALITY AS c(id, workflow, key, kind, payload, chain_id, block, hash, gen, status, position, wake_at, ord)
		JOIN rflow.workflows w ON w.name = c.workflow AND w.retired_at IS NULL
		CROSS JOIN LATERAL (SELECT coalesce(c.gen = w.generation AND NOT w.paused, false) AS born) b
		WHERE NOT EXISTS (SELECT 1 FROM rflow.run_tombstones t WHERE t.workflow_name = c.workflow AND t.trigger_key = c.key)
		ORDER BY c.ord
		ON CONFLICT (workflow_name, trigger_key) DO NOTHING
		RETURNING id, workflow_name, generation, status, (SELECT paused FROM rflow.workflows WHERE name = workflow_name)`,
		raw, wfs, keys, kinds, payloads, chainIDs, blocks, hashes, gens, statuses, positions, wakes)
	if err != nil {
		return nil, fmt.Errorf("claim %d run(s): %w", n, err)
	}
	index := make(map[uuid.UUID]int, n)
	for i, id := range ids {
		index[id] = i
	}
	var out []ClaimedRun
	var r ClaimedRun
	var status string
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.Workflow, &r.Generation, &status, &r.Paused}, func() error {
		r.Index = index[r.ID]
		r.Born = births != nil && births[r.Index].ID != uuid.Nil && status != string(RunQueued)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim %d run(s): %w", n, err)
	}
	return out, nil
}
