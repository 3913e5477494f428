package jobs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain"
	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
)

// TestReorgMovingLogsKeepsTheirRunsOnGeth is issue 26's reproduction as it
// was found, on geth --dev: two transactions of three Deposit logs each, in
// consecutive blocks (geth mines one a second), each log paid once 2
// blocks deep; debug_setHead goes back below both, the same signed
// transactions are sent again (geth's pool also re-injects what a shallow
// rewind drops) and return in one block, the second one's logs behind the
// first's. The same occurrences keep their runs: six runs in all, each
// re-included, and the payee holds exactly the 21 wei owed.
func TestReorgMovingLogsKeepsTheirRunsOnGeth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := gethtest.Start(t, gethtest.Options{Period: time.Second})
	em := anviltest.DeployEmitter(t, node)
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	payee := crypto.PubkeyToAddress(k.PublicKey)
	project := chainProject(t, depositPayProject(gethtest.ChainID, node.URL, em, payee, "1ms"), func(k string) (string, bool) {
		if k == "OPS_KEY" {
			return anviltest.DevKeys[1], true
		}
		return os.LookupEnv(k)
	})
	pool, e := deployed(t, project)
	runChain(t, pool, e)

	base := node.BlockNumber()
	a := em.EmitMany(3, 1)
	c := em.EmitMany(3, 4)
	require.Equal(t, a.BlockNumber.Uint64()+1, c.BlockNumber.Uint64())
	settled(t, pool, node.Client(), payee, 21, 6)
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	keys := make([]string, 0, 6)
	for _, tx := range []common.Hash{a.TxHash, c.TxHash} {
		for i := uint(0); i < 3; i++ {
			keys = append(keys, chain.EventKey(gethtest.ChainID, tx, i, chain.PhaseConfirmed, false))
		}
	}
	require.Equal(t, 6, count(`SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key = ANY($1)`, keys))

	head := node.BlockNumber()
	eventually(t, 10*time.Second, "the window at the tip", func() bool {
		return count(`SELECT count(*) FROM indexer.blocks WHERE chain_id = $1 AND number >= $2`, gethtest.ChainID, head) > 0
	})
	rawA, rawC := node.RawTx(a.TxHash), node.RawTx(c.TxHash)
	node.SetHead(base)
	for _, raw := range [][]byte{rawA, rawC} {
		if err := node.SendRaw(raw); err != nil {
			require.ErrorContains(t, err, "already known", "re-injected by geth itself")
		}
	}
	eventually(t, 60*time.Second, "both deposits re-mined in one block", func() bool {
		ra, errA := node.Client().TransactionReceipt(ctx, a.TxHash)
		rc, errC := node.Client().TransactionReceipt(ctx, c.TxHash)
		return errA == nil && errC == nil && ra.BlockHash == rc.BlockHash && rc.Logs[0].Index > ra.Logs[0].Index
	})
	eventually(t, 90*time.Second, "six responses, all reincluded", func() bool {
		return count(`SELECT count(*) FROM rflow.reorg_runs WHERE status = 'reincluded'`) == 6
	})
	settled(t, pool, node.Client(), payee, 21, 6)
	require.Equal(t, 6, count(`SELECT count(*) FROM rflow.workflow_runs WHERE trigger_key = ANY($1)`, keys), "no run under a new key")
	require.Zero(t, count(`SELECT count(*) FROM rflow.reorg_runs WHERE status <> 'reincluded'`))
}
