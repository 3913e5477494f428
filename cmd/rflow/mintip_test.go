package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
	"github.com/rflow-dev/rflow/store/storetest"
)

const minTipProject = `
name: mintip
networks:
  - { name: geth, chain_id: 1337, rpc: %q, confirmations: 1 }
wallets:
  - { name: ops, private_key: %q }
  - { name: capped, private_key: %q, max_priority_fee: 10 }
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, to: %q, value: "7" }
  - name: paycapped
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: capped, to: %[4]q, value: "5" }
`

// TestSendMeetsNodeMinimumTip: against a geth that requires a tip of 1000
// wei (--txpool.pricelimit 1000; its oracle suggests 1), a workflow's send
// confirms with a tip of at least 1000 and the wallet's next send goes
// through too; a wallet capped at max_priority_fee: 10 fails its send with
// the reason (runs show says it), holds no nonce and no transaction in the
// mempool, and neither its next send nor the other wallet's hang behind
// it. Before, the refused bytes were re-sent every second, for ever.
func TestSendMeetsNodeMinimumTip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The minimum is set once the harness has funded the dev keys (its
	// funding transfers pay geth's default tip): miner_setGasPrice sets the
	// txpool's minimum as --txpool.pricelimit does, and the miner's, while
	// the gas price oracle keeps suggesting the dev default of 1 wei.
	node := gethtest.Start(t, gethtest.Options{Args: []string{"--http.api", "eth,net,web3,debug,txpool,admin,miner"}})
	var ok bool
	node.Call(&ok, "miner_setGasPrice", "0x3e8")
	require.True(t, ok)
	client := node.Client()
	tip, err := client.SuggestGasTipCap(ctx)
	require.NoError(t, err)
	require.Less(t, tip.Int64(), int64(1000), "the node suggests less than it takes")
	_, ops := anviltest.Key(t, 2)
	_, capped := anviltest.Key(t, 3)
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	to := crypto.PubkeyToAddress(k.PublicKey)
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(minTipProject, node.URL,
		"0x"+anviltest.DevKeys[2], "0x"+anviltest.DevKeys[3], to.Hex())), 0o644))
	db := storetest.URL(t)
	p := startRflow(t, db, config, "")
	defer p.stop(t)

	// run starts workflow wf and waits for its run to end; it returns the
	// run's status and `runs show`.
	run := func(wf string) (string, string) {
		t.Helper()
		var id string
		require.Eventually(t, func() bool {
			out, _, code := rflowCmd(t, "--database-url", db, "run", wf, "-c", config)
			if code != 0 {
				return false
			}
			id = strings.Fields(out)[1]
			return true
		}, 30*time.Second, 200*time.Millisecond)
		var status string
		require.Eventually(t, func() bool {
			out, _, code := rflowCmd(t, "--database-url", db, "runs", "show", id, "-o", "json", "-c", config)
			var r struct{ Status string }
			if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
				return false
			}
			status = r.Status
			return status == "completed" || status == "failed" || status == "dead_lettered"
		}, 60*time.Second, 200*time.Millisecond, "run %s of %s never ended; rflow:\n%s", id, wf, p.out)
		show, stderr, code := rflowCmd(t, "--database-url", db, "runs", "show", id, "-c", config)
		require.Equal(t, 0, code, stderr)
		return status, show
	}
	minedTips := func(from common.Address) []int64 {
		t.Helper()
		n, err := client.NonceAt(ctx, from, nil)
		require.NoError(t, err)
		var tips []int64
		head, err := client.BlockNumber(ctx)
		require.NoError(t, err)
		for b := uint64(0); b <= head; b++ {
			blk, err := client.BlockByNumber(ctx, new(big.Int).SetUint64(b))
			require.NoError(t, err)
			for _, tx := range blk.Transactions() {
				if s, err := client.TransactionSender(ctx, tx, blk.Hash(), 0); err == nil && s == from {
					tips = append(tips, tx.GasTipCap().Int64())
				}
			}
		}
		require.Len(t, tips, int(n))
		return tips
	}

	for range 2 {
		status, show := run("pay")
		require.Equal(t, "completed", status, show)
	}
	for _, tip := range minedTips(ops) {
		require.GreaterOrEqual(t, tip, int64(1000), "each send paid the node's minimum")
	}
	require.Len(t, minedTips(ops), 2, "one transaction per send")

	status, show := run("paycapped")
	require.NotEqual(t, "completed", status, show)
	require.Contains(t, show, "the node requires a tip of at least 1000 wei; the wallet's max_priority_fee caps it at 10 wei")
	// The wallet's next send fails as plainly, without touching the node,
	// and the other wallet is not held up.
	status, show = run("paycapped")
	require.NotEqual(t, "completed", status, show)
	require.Contains(t, show, "the wallet's max_priority_fee caps it at 10 wei")
	status, show = run("pay")
	require.Equal(t, "completed", status, show)

	n, err := client.PendingNonceAt(ctx, capped)
	require.NoError(t, err)
	require.Zero(t, n, "nothing of the capped wallet is mined or pending")
	bal, err := client.BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Equal(t, int64(21), bal.Int64(), "the three sends of ops paid, the capped ones did not")
}
