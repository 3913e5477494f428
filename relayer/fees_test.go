package relayer

import (
	"errors"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBumpedRaisesBothFeesAtLeastPercent(t *testing.T) {
	t.Parallel()
	old := fees{GasLimit: 50_000, MaxFee: big.NewInt(1000), Tip: big.NewInt(0)}
	next, ok := bumped(old, fees{MaxFee: big.NewInt(900), Tip: big.NewInt(0)}, 10, feeCaps{})
	require.True(t, ok)
	require.Equal(t, int64(1100), next.MaxFee.Int64())
	require.Equal(t, int64(1), next.Tip.Int64(), "a zero tip still grows")
	require.Equal(t, uint64(50_000), next.GasLimit)

	// The market wins when it asks for more.
	next, ok = bumped(old, fees{MaxFee: big.NewInt(5000), Tip: big.NewInt(7)}, 10, feeCaps{})
	require.True(t, ok)
	require.Equal(t, int64(5000), next.MaxFee.Int64())
	require.Equal(t, int64(7), next.Tip.Int64())

	// Rounding goes up: 12% of 1001 is 120.12.
	next, _ = bumped(fees{MaxFee: big.NewInt(1001), Tip: big.NewInt(1001)}, fees{}, 12, feeCaps{})
	require.Equal(t, int64(1122), next.MaxFee.Int64())
}

func TestBumpedRespectsCap(t *testing.T) {
	t.Parallel()
	old := fees{MaxFee: big.NewInt(1000), Tip: big.NewInt(100)}
	next, ok := bumped(old, fees{}, 10, feeCaps{fee: big.NewInt(1150)})
	require.True(t, ok)
	require.Equal(t, int64(1100), next.MaxFee.Int64()) // the +10% floor beats an empty market and fits the cap
	require.Equal(t, int64(110), next.Tip.Int64())
	_, ok = bumped(old, fees{MaxFee: big.NewInt(2000), Tip: big.NewInt(100)}, 10, feeCaps{fee: big.NewInt(1050)})
	require.False(t, ok, "no valid replacement fits under the cap")

	legacy := fees{GasPrice: big.NewInt(100)}
	next, ok = bumped(legacy, fees{GasPrice: big.NewInt(90)}, 10, feeCaps{})
	require.True(t, ok)
	require.Equal(t, int64(110), next.GasPrice.Int64())
	require.Nil(t, next.MaxFee)
	_, ok = bumped(legacy, fees{}, 10, feeCaps{fee: big.NewInt(105)})
	require.False(t, ok)
}

func TestCappedLimitsTipToMaxFee(t *testing.T) {
	t.Parallel()
	f := fees{MaxFee: big.NewInt(500), Tip: big.NewInt(400)}.capped(feeCaps{fee: big.NewInt(300)})
	require.Equal(t, int64(300), f.MaxFee.Int64())
	require.Equal(t, int64(300), f.Tip.Int64())
	require.Equal(t, int64(300), f.price().Int64())
}

func TestClassifySend(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]sendClass{
		"already known":                                                           sendKnown,
		"transaction already imported":                                            sendKnown,
		"nonce too low: next nonce 5, tx nonce 3":                                 sendNonceTooLow,
		"replacement transaction underpriced":                                     sendUnderpriced,
		"transaction underpriced":                                                 sendTipTooLow,
		"insufficient funds for gas * price + value":                              sendInsufficientFunds,
		"Insufficient funds for gas * price + value":                              sendInsufficientFunds, // anvil
		"insufficient funds for gas * price + value: address 0xabc have 1 want 2": sendInsufficientFunds,
		"intrinsic gas too low: have 20000, want 21000":                           sendRejected,
		"invalid sender":                                                          sendRejected,
		"invalid chain id for signer: have 1 want 31337":                          sendRejected,
		"only replay-protected (EIP-155) transactions allowed over RPC":           sendRejected,
		"exceeds block gas limit":                                                 sendRejected,
		"transaction type not supported":                                          sendRejected,
		"max fee per gas less than block base fee":                                sendFeeTooLow, // anvil, geth core
		"context deadline exceeded":                                               sendTransient,
		"429 Too Many Requests":                                                   sendTransient,
	} {
		require.Equal(t, want, classifySend(errors.New(msg)), msg)
	}
	require.Equal(t, sendOK, classifySend(nil))
}
