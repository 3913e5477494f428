package jobs_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/jobs"
	"github.com/rflow-dev/rflow/store"
)

// TestLiveWaitFeedSkipsTestRuns: a test rehearsal's run parked on a
// wait_for (its jobs in the rehearsal's own River schema) is left alone by
// a live engine's wait feed: the matching log neither arms nor settles it,
// and no job of it lands in the live schema, where nothing would work it.
// The test engine's own feed then matches it and the run completes.
func TestLiveWaitFeedSkipsTestRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := "0x00000000000000000000000000000000000000aa"
	project := chainProject(t, `
name: tw
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1", confirmations: 0 }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "`+addr+`" }
workflows:
  - name: hold
    trigger: { manual: {} }
    steps:
      - id: claimed
        wait_for: { event: { contract: Vault, event: Claimed }, confirmations: 0 }
      - id: after
        delay: { duration: 1ms }
`, nil)
	pool, live := deployed(t, project)
	schema := "rehearsal_" + uuid.New().String()[:8] + "000000000000000000000000"
	require.NoError(t, store.CreateRehearsalRiver(ctx, pool, schema))
	t.Cleanup(func() { _ = store.DropRehearsalRiver(context.Background(), pool, schema) })
	rehearsal := startEngineWith(t, jobs.Config{Pool: pool, Project: project, FetchCooldown: time.Millisecond,
		Rehearsal: &jobs.Rehearsal{Rehearsal: store.Rehearsal{Kind: store.RehearsalTest}, RiverSchema: schema,
			Send: func(context.Context, jobs.SendCapture) (map[string]any, error) { return nil, nil }}})
	wf := project.Workflow("hold")
	ns := store.Rehearsal{Kind: store.RehearsalTest, Session: uuid.NewString(), Workflow: "hold"}.Name()
	var id uuid.UUID
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := store.DeployWorkflow(ctx, tx, ns, wf.Hash, wf.Spec); err != nil {
			return err
		}
		var err error
		id, _, err = rehearsal.StartRunTx(ctx, tx, store.ManualClaim(ns, "k", nil))
		return err
	}))
	eventuallyWait(t, pool, id, store.WaitWaiting)

	ev := anviltest.EmitterABI(t).Events["Claimed"]
	feed := store.WaitFeed{ChainID: 31337, Address: addr, Topic: ev.ID.Hex()}
	log := chain.Decoded{Event: "Claimed", Address: common.HexToAddress(addr), Block: 5, TxHash: common.BigToHash(big.NewInt(1)),
		Args: map[string]any{"user": common.HexToAddress(addr), "amount": big.NewInt(1)}}
	deliver := func(e *jobs.Engine) {
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return e.MatchTx(ctx, tx, chain.WaitDelivery{Feed: feed, Head: 10, Logs: []chain.Decoded{log}})
		}))
	}
	deliver(live)
	ws := runWaits(t, pool, id)
	require.Len(t, ws, 1)
	require.Equal(t, store.WaitWaiting, ws[0].Status, "the live feed left the test run's wait alone")
	require.Nil(t, ws[0].CandBlock)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river.river_job WHERE coalesce(args->>'run_id', args->>0) = $1`, id.String()).Scan(&n))
	require.Zero(t, n, "no job of the test run in the live River schema")

	deliver(rehearsal)
	require.Equal(t, store.WaitMatched, eventuallyWait(t, pool, id, store.WaitMatched).Status)
	require.Eventually(t, func() bool {
		run, err := store.GetRun(ctx, pool, id, false)
		require.NoError(t, err)
		return run.Status == store.RunCompleted
	}, 30*time.Second, 20*time.Millisecond, "the test engine moved its run on")
}
