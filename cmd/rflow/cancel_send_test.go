package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/store/storetest"
)

const cancelSendProject = `
name: cancelsend
networks:
  - { name: local, chain_id: 31337, rpc: %q, confirmations: 1 }
wallets:
  - { name: ops, private_key: %q }
workflows:
  - name: pay
    trigger: { manual: {} }
    steps:
      - id: pay
        send: { wallet: ops, network: local, to: %q, value: "${{ gwei(1) }}" }
`

// TestRunsCancelReplacesSend: `rflow runs cancel` on a run whose send sits
// in the mempool (automine off) says plainly the original may still be
// mined; the running `rflow start` replaces it with a same-nonce no-op; once
// mined, `runs show` says the no-op won, and the recipient got nothing.
func TestRunsCancelReplacesSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := anviltest.Start(t, anviltest.Options{NoMining: true})
	_, from := anviltest.Key(t, 3)
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	to := crypto.PubkeyToAddress(k.PublicKey)
	config := filepath.Join(t.TempDir(), "rflow.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(cancelSendProject, node.URL, "0x"+anviltest.DevKeys[3], to.Hex())), 0o644))
	db := storetest.URL(t)
	p := startRflow(t, db, config, "")
	defer p.stop(t)
	cli := func(args ...string) string {
		t.Helper()
		out, stderr, code := rflowCmd(t, append([]string{"--database-url", db}, args...)...)
		require.Equal(t, 0, code, "rflow %v: %s", args, stderr)
		return out
	}
	var id string
	require.Eventually(t, func() bool {
		out, _, code := rflowCmd(t, "--database-url", db, "run", "pay", "-c", config)
		if code != 0 {
			return false
		}
		id = strings.Fields(out)[1]
		return true
	}, 20*time.Second, 200*time.Millisecond)
	client := node.Client()
	require.Eventually(t, func() bool {
		n, err := client.PendingNonceAt(ctx, from)
		return err == nil && n == 1
	}, 30*time.Second, 100*time.Millisecond, "the send reaches the mempool")

	out := cli("runs", "cancel", id, "-c", config)
	require.Contains(t, out, "cancelled (status cancelled)")
	require.Contains(t, out, "pay: cancel: tx broadcast at nonce 0")
	require.Contains(t, out, "the original may still be mined")

	// The no-op replaces the original in the mempool: mine it.
	require.Eventually(t, func() bool {
		var txs map[string]map[string]map[string]map[string]any
		node.Call(&txs, "txpool_content")
		for _, byNonce := range txs["pending"] {
			for _, tx := range byNonce {
				if strings.EqualFold(fmt.Sprint(tx["to"]), from.Hex()) {
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the no-op is in the mempool")
	node.Mine(1)
	require.Eventually(t, func() bool {
		return strings.Contains(cli("runs", "show", id, "-c", config), "the no-op replacement was mined at nonce 0")
	}, 30*time.Second, 200*time.Millisecond)
	node.Mine(1)
	bal, err := client.BalanceAt(ctx, to, nil)
	require.NoError(t, err)
	require.Zero(t, bal.Sign(), "the original's value never moved")
	n, err := client.NonceAt(ctx, from, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n, "one nonce used, by the no-op")
}
