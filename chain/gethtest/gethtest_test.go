package gethtest_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/chain/gethtest"
)

func TestStartFundsDevKeys(t *testing.T) {
	t.Parallel()
	n := gethtest.Start(t, gethtest.Options{})
	_, addr := anviltest.Key(t, 1)
	bal, err := n.Client().BalanceAt(t.Context(), addr, nil)
	require.NoError(t, err)
	require.Equal(t, gethtest.Funding, bal)
	id, err := n.Client().ChainID(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(gethtest.ChainID), id.Int64())
}

// geth refuses what anvil serves: a log range over its limit.
func TestRangeLimitRefused(t *testing.T) {
	t.Parallel()
	n := gethtest.Start(t, gethtest.Options{RangeLimit: 5})
	n.Mine(8)
	_, err := n.Client().FilterLogs(t.Context(), ethereum.FilterQuery{FromBlock: big.NewInt(0), ToBlock: big.NewInt(8)})
	require.ErrorContains(t, err, "exceed maximum block range")
	_, err = n.Client().FilterLogs(t.Context(), ethereum.FilterQuery{FromBlock: big.NewInt(0), ToBlock: big.NewInt(4)})
	require.NoError(t, err)
}

// The reorg that moves a log: two transactions in consecutive blocks, the
// chain rewound below both, and geth re-mines the same transactions, their
// logs at other block positions.
func TestSetHeadRemovesAndReminesTransactions(t *testing.T) {
	t.Parallel()
	n := gethtest.Start(t, gethtest.Options{})
	e := anviltest.DeployEmitter(t, n)
	base := n.BlockNumber()
	r1 := e.EmitMany(3, 1)
	r2 := e.EmitMany(3, 4)
	require.Equal(t, r1.BlockNumber.Uint64()+1, r2.BlockNumber.Uint64())
	require.Equal(t, uint(0), r2.Logs[0].Index, "each opens its block")

	n.SetHead(base)
	var got [2]*types.Receipt
	require.Eventually(t, func() bool {
		for i, h := range []common.Hash{r1.TxHash, r2.TxHash} {
			r, err := n.Client().TransactionReceipt(t.Context(), h)
			if err != nil || r.BlockNumber.Uint64() <= base {
				return false
			}
			got[i] = r
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "geth re-mines the dropped transactions from its pool")
	require.Equal(t, got[0].BlockNumber, got[1].BlockNumber, "both return in one block")
	require.Len(t, got[1].Logs, 3)
	require.Equal(t, uint(3), got[1].Logs[0].Index, "the second transaction's logs now sit behind the first's")
}

// A node with a minimum tip refuses less and states what it needs; the
// harness's own transactions pay it.
func TestPriceLimitIsEnforced(t *testing.T) {
	t.Parallel()
	n := gethtest.Start(t, gethtest.Options{PriceLimit: 1000})
	n.Mine(1)
	key, from := anviltest.Key(t, 2)
	c := n.Client()
	nonce, err := c.PendingNonceAt(t.Context(), from)
	require.NoError(t, err)
	tx, err := types.SignTx(types.NewTx(&types.DynamicFeeTx{ChainID: big.NewInt(gethtest.ChainID), Nonce: nonce,
		GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(100_000_000_000), Gas: 21000, To: &from}),
		types.LatestSignerForChainID(big.NewInt(gethtest.ChainID)), key)
	require.NoError(t, err)
	err = c.SendTransaction(t.Context(), tx)
	require.ErrorContains(t, err, "minimum needed 1000")
}
