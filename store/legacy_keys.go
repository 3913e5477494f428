package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// adoptLegacyKeys moves each run claimed under a claim's LegacyKey, in the
// claim's block, to the claim's TriggerKey (unless that key has a run
// already), in tx, so the claim that follows finds its occurrence taken.
// The same block hash and block log index are the same log, whatever its
// transaction's position: the key moves only then. Only claims at or below
// their chain's rflow.legacy_event_keys bound are checked (migration 028):
// on a database that never held a legacy key this is one small query.
func adoptLegacyKeys(ctx context.Context, tx pgx.Tx, claims []Claim) error {
	if !anyLegacy(claims) {
		return nil
	}
	bounds := map[int64]int64{}
	rows, err := tx.Query(ctx, `SELECT chain_id, max_block FROM rflow.legacy_event_keys`)
	if err != nil {
		return fmt.Errorf("legacy key bounds: %w", err)
	}
	var chain, block int64
	if _, err := pgx.ForEachRow(rows, []any{&chain, &block}, func() error { bounds[chain] = block; return nil }); err != nil {
		return fmt.Errorf("legacy key bounds: %w", err)
	}
	if len(bounds) == 0 {
		return nil
	}
	var wfs, keys, legacy, hashes []string
	for _, c := range claims {
		if b, ok := bounds[c.ChainID]; ok && c.LegacyKey != "" && c.BlockHash != "" && c.BlockNumber <= b {
			wfs, keys, legacy, hashes = append(wfs, c.Workflow), append(keys, c.TriggerKey), append(legacy, c.LegacyKey),
				append(hashes, c.BlockHash)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `
		UPDATE rflow.workflow_runs r SET trigger_key = c.key, updated_at = now()
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS c(workflow, key, legacy, hash)
		WHERE r.workflow_name = c.workflow AND r.trigger_key = c.legacy AND r.block_hash = c.hash
		  AND NOT EXISTS (SELECT 1 FROM rflow.workflow_runs x WHERE x.workflow_name = c.workflow AND x.trigger_key = c.key)`,
		wfs, keys, legacy, hashes); err != nil {
		return fmt.Errorf("move %d legacy trigger key(s): %w", len(keys), err)
	}
	return nil
}

func anyLegacy(claims []Claim) bool {
	for _, c := range claims {
		if c.LegacyKey != "" {
			return true
		}
	}
	return false
}
