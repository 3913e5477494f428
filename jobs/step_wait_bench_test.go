package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store"
	"github.com/rflow-dev/rflow/trigger"
)

// BenchmarkWaitMatch delivers Claimed logs to a feed with N waits parked
// on that one event, each keyed on its own amount: one delivery finds its
// wait by index, so deliveries/s must not fall with N (compare waits=100
// with waits=10000). Each delivery arms its wait; the transaction is rolled
// back so every iteration sees the same N parked waits.
func BenchmarkWaitMatch(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("waits=%d", n), func(b *testing.B) { benchWaitMatch(b, n) })
	}
}

func benchWaitMatch(b *testing.B, n int) {
	ctx := context.Background()
	addr := "0x00000000000000000000000000000000000000aa"
	project := chainProject(b, `
name: bench
networks:
  - { name: local, chain_id: 31337, rpc: "http://127.0.0.1:1", confirmations: 5 }
contracts:
  - { name: Vault, abi: ./Vault.json, network: local, address: "`+addr+`" }
workflows:
  - name: waits
    trigger: { manual: {} }
    steps:
      - id: claimed
        wait_for:
          event: { contract: Vault, event: Claimed, where: "${{ event.amount == trigger.input.n }}" }
          timeout: 1h
`, nil)
	pool, e := deployed(b, project)
	claims := make([]store.Claim, n)
	for i := range claims {
		payload, err := json.Marshal(trigger.ManualPayload{Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))})
		require.NoError(b, err)
		claims[i] = store.Claim{Workflow: "waits", TriggerKey: fmt.Sprint(i), TriggerKind: trigger.Manual, Trigger: payload}
	}
	require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := e.ClaimTx(ctx, tx, claims)
		return err
	}))
	var parked int
	require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM rflow.waits WHERE status = 'waiting'`).Scan(&parked))
	require.Equal(b, n, parked)
	_, err := pool.Exec(ctx, `ANALYZE rflow.waits`)
	require.NoError(b, err)

	ev := anviltest.EmitterABI(b).Events["Claimed"]
	feed := store.WaitFeed{ChainID: 31337, Address: strings.ToLower(common.HexToAddress(addr).Hex()), Topic: ev.ID.Hex()}
	// With many waits the lookup is an index scan (a few rows are cheaper
	// to scan).
	rows, err := pool.Query(ctx, `EXPLAIN SELECT id FROM rflow.waits
		WHERE chain_id = $1 AND topic = $2 AND match_key = ANY($3) AND status IN ('waiting', 'armed')
		  AND address = $4 AND ($5::bigint[] IS NULL OR id = ANY($5))`,
		feed.ChainID, feed.Topic, []string{"", "amount=n:1", "block=n:10"}, feed.Address, []int64(nil))
	require.NoError(b, err)
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(b, err)
	if n >= 1000 {
		require.Contains(b, strings.Join(plan, "\n"), "waits_live_idx", "plan: %v", plan)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		log := chain.Decoded{Event: "Claimed", Address: common.HexToAddress(addr), Block: 10, LogIndex: uint(i),
			Args: map[string]any{"user": common.HexToAddress(addr), "amount": big.NewInt(int64(i % n))}}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := e.MatchTx(ctx, tx, chain.WaitDelivery{Feed: feed, Head: 10, Logs: []chain.Decoded{log}}); err != nil {
				return err
			}
			var status string
			if err := tx.QueryRow(ctx, `SELECT status FROM rflow.waits
				WHERE chain_id = $1 AND topic = $2 AND match_key = $3 AND status IN ('waiting', 'armed')`,
				feed.ChainID, feed.Topic, fmt.Sprintf("amount=n:%d", i%n)).Scan(&status); err != nil {
				return err
			}
			if status != "armed" {
				return fmt.Errorf("wait %d is %s, want armed", i%n, status)
			}
			return errRollback
		})
		if err != errRollback {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
}

var errRollback = fmt.Errorf("rollback")
