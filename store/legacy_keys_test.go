package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/migrations"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/store/storetest"
)

// TestLegacyEventKeysAdopted: runs claimed before event keys named the
// log's position in its transaction (chain_id:tx_hash:log_index) are found
// by migration 028, and a claim of the same log (same block, same block log
// index) under the new key takes that run over instead of making a second
// one; the same legacy key in another block is another log.
func TestLegacyEventKeysAdopted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO rflow.workflows (name, spec_hash, spec, generation) VALUES ('wf', 'h', '{}', 1)`)
	require.NoError(t, err)
	claim := func(claims ...store.Claim) []store.ClaimedRun {
		var out []store.ClaimedRun
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			out, err = store.ClaimRuns(ctx, tx, claims)
			return err
		}))
		return out
	}
	tx := "0x" + strings.Repeat("ab", 32)
	old := func(key string, block int64, hash string) store.Claim {
		return store.Claim{Workflow: "wf", TriggerKey: key, TriggerKind: "event", ChainID: 31337, BlockNumber: block, BlockHash: hash}
	}
	// What an earlier version claimed: logs 5 and 6 of block 7 (one tx,
	// run_on: both for log 6), and a run of another chain's block 9.
	require.Len(t, claim(old("31337:"+tx+":5", 7, "0xb7"), old("31337:"+tx+":6:confirmed", 7, "0xb7"),
		store.Claim{Workflow: "wf", TriggerKey: "1:" + tx + ":0", TriggerKind: "event", ChainID: 1, BlockNumber: 9, BlockHash: "0xc9"},
		store.Claim{Workflow: "wf", TriggerKey: "31337:" + tx + ":tx9", TriggerKind: "event", ChainID: 31337, BlockNumber: 20, BlockHash: "0xd20"}), 4)

	// Migration 028 as an upgrade runs it, over those runs.
	_, err = pool.Exec(ctx, `DROP TABLE rflow.legacy_event_keys; ALTER TABLE rflow.reorg_runs DROP COLUMN reincluded_at`)
	require.NoError(t, err)
	sql, err := migrations.FS.ReadFile("028_event_identity.sql")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, string(sql))
	require.NoError(t, err)
	bounds := map[int64]int64{}
	rows, err := pool.Query(ctx, `SELECT chain_id, max_block FROM rflow.legacy_event_keys`)
	require.NoError(t, err)
	var c, b int64
	_, err = pgx.ForEachRow(rows, []any{&c, &b}, func() error { bounds[c] = b; return nil })
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{31337: 7, 1: 9}, bounds, "the newest legacy-keyed block per chain; new keys are not legacy")

	fresh := func(key, legacy string, block int64, hash string) store.Claim {
		c := old(key, block, hash)
		c.LegacyKey = legacy
		return c
	}
	// The same logs read again (a cursor rewound, a replay) under the new
	// keys: no new run, the old runs carry the new keys.
	require.Empty(t, claim(fresh("31337:"+tx+":tx0", "31337:"+tx+":5", 7, "0xb7"),
		fresh("31337:"+tx+":tx1:confirmed", "31337:"+tx+":6:confirmed", 7, "0xb7")))
	keys := func() []string {
		rows, err := pool.Query(ctx, `SELECT trigger_key FROM rflow.workflow_runs WHERE chain_id = 31337 ORDER BY created_at, id`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []string{"31337:" + tx + ":tx0", "31337:" + tx + ":tx1:confirmed", "31337:" + tx + ":tx9"}, keys())

	// A legacy key in another block is another log (the transaction moved,
	// so its block log index means another position): a run of its own.
	require.Len(t, claim(old("31337:"+tx+":3", 6, "0xb6")), 1)
	require.Len(t, claim(fresh("31337:"+tx+":tx3", "31337:"+tx+":3", 7, "0xb7-other")), 1)
	require.Len(t, keys(), 5)
}
