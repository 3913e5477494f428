package relayer

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The refusals nodes send when a transaction pays less than their own
// minimum, as they word them.
var tipRefusals = map[string]int64{
	// geth ≥ 1.14 (--txpool.pricelimit), Polygon bor, BNB Chain.
	"transaction gas price below minimum: gas tip cap 1, minimum needed 1000":                     1000,
	"transaction gas price below minimum: gas tip cap 30000000000, minimum needed 25000000000000": 25000000000000,
	// geth 1.13.
	"transaction underpriced: tip needed 1000, tip permitted 1": 1000,
	// reth.
	"transaction priority fee below minimum required priority fee 1000": 1000,
	// Nethermind, and a full geth pool: no number.
	"transaction underpriced": 0,
	// Besu: no number.
	"Gas price below configured minimum gas price": 0,
}

func TestClassifyTipRefusals(t *testing.T) {
	t.Parallel()
	for msg, need := range tipRefusals {
		err := errors.New(msg)
		require.Equal(t, sendTipTooLow, classifySend(err), msg)
		if need == 0 {
			require.Nil(t, statedMinimum(err), msg)
			continue
		}
		require.Equal(t, big.NewInt(need), statedMinimum(err), msg)
	}
	// Not a node's minimum: the replacement rule, a full pool, intrinsic gas
	// (which also says "minimum needed").
	for msg, want := range map[string]sendClass{
		"replacement transaction underpriced":                                                sendUnderpriced,
		"intrinsic gas too low: gas 21000, minimum needed 53000":                             sendRejected,
		"max fee per gas less than block base fee: address 0x1, maxFeePerGas: 7, baseFee: 8": sendFeeTooLow,
	} {
		require.Equal(t, want, classifySend(errors.New(msg)), msg)
	}
}

func FuzzStatedMinimum(f *testing.F) {
	for msg := range tipRefusals {
		f.Add(msg)
	}
	f.Add("minimum needed 99999999999999999999999999999999999999999999999999999999999999999999999999999999999")
	f.Add("tip needed: -5")
	f.Fuzz(func(t *testing.T, msg string) {
		need := statedMinimum(errors.New(msg))
		if need == nil {
			return
		}
		require.GreaterOrEqual(t, need.Sign(), 0, "a stated minimum is never negative")
		require.LessOrEqual(t, need.BitLen(), 260, "a stated minimum has at most 78 digits")
		require.Contains(t, strings.ToLower(msg), need.String())
	})
}

func TestRaisedMeetsStatedMinimum(t *testing.T) {
	t.Parallel()
	refused := fees{GasLimit: 21_000, MaxFee: big.NewInt(2_000_000_001), Tip: big.NewInt(1)}
	market := fees{MaxFee: big.NewInt(2_000_000_002), Tip: big.NewInt(2)}
	next, short := raised(refused, market, big.NewInt(1000), feeCaps{}, 12)
	require.Empty(t, short)
	require.Equal(t, int64(1000), next.Tip.Int64())
	require.Equal(t, int64(2_000_000_000+1000), next.MaxFee.Int64(), "the room for the base fee is kept")
	require.Equal(t, uint64(21_000), next.GasLimit)

	// The market's tip wins when it is higher.
	next, _ = raised(refused, fees{MaxFee: big.NewInt(2_000_005_000), Tip: big.NewInt(5000)}, big.NewInt(1000), feeCaps{}, 12)
	require.Equal(t, int64(5000), next.Tip.Int64())

	// No number stated: a bump above the refused tip.
	next, short = raised(refused, market, nil, feeCaps{}, 12)
	require.Empty(t, short)
	require.Equal(t, int64(2), next.Tip.Int64())

	// Legacy: the gas price is what the node compares.
	next, short = raised(fees{GasPrice: big.NewInt(10)}, fees{GasPrice: big.NewInt(10)}, big.NewInt(1000), feeCaps{}, 12)
	require.Empty(t, short)
	require.Equal(t, int64(1000), next.GasPrice.Int64())
}

func TestRaisedStopsAtTheCaps(t *testing.T) {
	t.Parallel()
	refused := fees{MaxFee: big.NewInt(2_000_000_001), Tip: big.NewInt(1)}
	market := fees{MaxFee: big.NewInt(2_000_000_002), Tip: big.NewInt(2)}

	_, short := raised(refused, market, big.NewInt(1000), feeCaps{tip: big.NewInt(10)}, 12)
	require.Equal(t, "the node requires a tip of at least 1000 wei; the wallet's max_priority_fee caps it at 10 wei", short)

	_, short = raised(refused, market, big.NewInt(1000), feeCaps{fee: big.NewInt(999), feeBy: "the wallet's max_fee"}, 12)
	require.Equal(t, "the node requires a tip of at least 1000 wei; the wallet's max_fee caps the fee per gas at 999 wei", short)

	// A cap the minimum fits under: paid, the max fee cut to the cap.
	next, short := raised(refused, market, big.NewInt(1000), feeCaps{fee: big.NewInt(1_000_000), tip: big.NewInt(1000)}, 12)
	require.Empty(t, short)
	require.Equal(t, int64(1000), next.Tip.Int64())
	require.Equal(t, int64(1_000_000), next.MaxFee.Int64())

	// Unstated, at the cap already.
	_, short = raised(fees{MaxFee: big.NewInt(100), Tip: big.NewInt(10)}, market, nil, feeCaps{tip: big.NewInt(10)}, 12)
	require.Equal(t, "the node requires a tip above 10 wei (it does not say how much); the wallet's max_priority_fee caps it at 10 wei", short)

	_, short = raised(fees{GasPrice: big.NewInt(10)}, fees{}, big.NewInt(1000), feeCaps{fee: big.NewInt(500), feeBy: "the send's fee cap"}, 12)
	require.Equal(t, "the node requires a gas price of at least 1000 wei; the send's fee cap caps the fee per gas at 500 wei", short)
}

func TestAtLeastKeepsBaseFeeRoom(t *testing.T) {
	t.Parallel()
	f := fees{MaxFee: big.NewInt(101), Tip: big.NewInt(1)}.atLeast(big.NewInt(1000))
	require.Equal(t, int64(1000), f.Tip.Int64())
	require.Equal(t, int64(1100), f.MaxFee.Int64())
	f = fees{MaxFee: big.NewInt(5000), Tip: big.NewInt(2000)}.atLeast(big.NewInt(1000))
	require.Equal(t, int64(2000), f.Tip.Int64(), "a higher tip stays")
	require.Equal(t, int64(1000), fees{GasPrice: big.NewInt(7)}.atLeast(big.NewInt(1000)).GasPrice.Int64())
}
