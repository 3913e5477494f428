package relayer

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/rflow-dev/rflow/store"
)

// fees is what a transaction pays for gas: EIP-1559 (MaxFee, Tip) when the
// chain has a base fee, else legacy (GasPrice).
type fees struct {
	GasLimit uint64
	MaxFee   *big.Int
	Tip      *big.Int
	GasPrice *big.Int
}

func (f fees) dynamic() bool { return f.MaxFee != nil }

// price is the most the transaction pays per gas.
func (f fees) price() *big.Int {
	if f.dynamic() {
		return f.MaxFee
	}
	return f.GasPrice
}

func (f fees) row() store.RelayerTxGas {
	return store.RelayerTxGas{GasLimit: int64(f.GasLimit), MaxFee: f.MaxFee, MaxPriorityFee: f.Tip, GasPrice: f.GasPrice}
}

func feesOf(g store.RelayerTxGas) fees {
	return fees{GasLimit: uint64(g.GasLimit), MaxFee: g.MaxFee, Tip: g.MaxPriorityFee, GasPrice: g.GasPrice}
}

// marketTTL is how long a network's fee quote is reused. Sends in a burst
// share one quote instead of asking the node twice per send; a quote this
// young is as good as a fresh one (bumps correct it anyway).
const marketTTL = time.Second

type quote struct {
	at time.Time
	f  fees
}

// market returns what the chain asks for now (a quote at most marketTTL
// old, one question for every concurrent caller, raised to the minimum its
// node stated lately, see learnMinimum), with gasLimit.
func (r *Relayer) market(ctx context.Context, chainID uint64, b Backend, gasLimit uint64) (fees, error) {
	r.mu.Lock()
	q, ok := r.quotes[chainID]
	r.mu.Unlock()
	if !ok || time.Since(q.at) > marketTTL {
		// Concurrent sends share one question (a burst would otherwise
		// ask once per worker before the first answer is cached).
		var err error
		q, err = askShared(ctx, &r.asking, fmt.Sprintf("quote/%d", chainID), func() (quote, error) {
			f, err := market(ctx, b)
			if err != nil {
				return quote{}, err
			}
			q := quote{at: time.Now(), f: f}
			r.mu.Lock()
			r.quotes[chainID] = q
			r.mu.Unlock()
			return q, nil
		})
		if err != nil {
			return fees{}, err
		}
	}
	f := q.f.atLeast(r.minimumPrice(chainID))
	f.GasLimit = gasLimit
	return f, nil
}

// market asks the node what it charges now: EIP-1559 fees (2 × base fee +
// tip) when the head has a base fee, else the suggested gas price.
func market(ctx context.Context, b Backend) (fees, error) {
	head, err := b.HeaderByNumber(ctx, nil)
	if err != nil {
		return fees{}, fmt.Errorf("head: %w", err)
	}
	if head.BaseFee != nil {
		tip, err := b.SuggestGasTipCap(ctx)
		if err != nil {
			return fees{}, fmt.Errorf("eth_maxPriorityFeePerGas: %w", err)
		}
		maxFee := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
		return fees{MaxFee: maxFee, Tip: tip}, nil
	}
	price, err := b.SuggestGasPrice(ctx)
	if err != nil {
		return fees{}, fmt.Errorf("eth_gasPrice: %w", err)
	}
	return fees{GasPrice: price}, nil
}

// feeCaps are the most a send may pay per gas: fee caps the max fee of
// EIP-1559 (a legacy gas price), tip the max priority fee. Nil: no cap.
type feeCaps struct {
	fee, tip *big.Int
	feeBy    string // whose cap fee is, for a reason to fail with
}

// capped lowers f to pay at most what c allows.
func (f fees) capped(c feeCaps) fees {
	if f.dynamic() {
		if c.fee != nil {
			f.MaxFee = minBig(f.MaxFee, c.fee)
		}
		if c.tip != nil {
			f.Tip = minBig(f.Tip, c.tip)
		}
		f.Tip = minBig(f.Tip, f.MaxFee)
	} else if c.fee != nil {
		f.GasPrice = minBig(f.GasPrice, c.fee)
	}
	return f
}

// bumped returns fees that replace old at the same nonce: every price at
// least percent higher (nodes require +10% on both the max fee and the tip),
// or the market's if that is higher, never above the caps c. ok is false
// when the caps leave no room for a valid replacement.
func bumped(old, now fees, percent int64, c feeCaps) (fees, bool) {
	up := func(v *big.Int) *big.Int { return raisedBy(v, percent) }
	f := fees{GasLimit: old.GasLimit}
	if old.dynamic() {
		minFee, minTip := up(old.MaxFee), up(old.Tip)
		f.Tip = minTip
		if now.dynamic() {
			f.Tip = maxBig(minTip, now.Tip)
		}
		f.MaxFee = minFee
		if now.dynamic() {
			f.MaxFee = maxBig(minFee, now.MaxFee)
		}
		f.MaxFee = maxBig(f.MaxFee, f.Tip)
		f = f.capped(c)
		return f, f.MaxFee.Cmp(minFee) >= 0 && f.Tip.Cmp(minTip) >= 0
	}
	minPrice := up(old.GasPrice)
	f.GasPrice = minPrice
	if now.GasPrice != nil {
		f.GasPrice = maxBig(minPrice, now.GasPrice)
	}
	f = f.capped(c)
	return f, f.GasPrice.Cmp(minPrice) >= 0
}

// raisedBy is ceil(v × (100+percent) / 100), and at least v+1 so a zero
// tip grows.
func raisedBy(v *big.Int, percent int64) *big.Int {
	n := new(big.Int).Mul(v, big.NewInt(100+percent))
	n.Add(n, big.NewInt(99)).Div(n, big.NewInt(100))
	return maxBig(n, new(big.Int).Add(v, big.NewInt(1)))
}

// unsigned builds the transaction to sign.
func unsigned(chainID, nonce uint64, to common.Address, value *big.Int, data []byte, f fees) *types.Transaction {
	if f.dynamic() {
		return types.NewTx(&types.DynamicFeeTx{ChainID: new(big.Int).SetUint64(chainID), Nonce: nonce,
			GasTipCap: f.Tip, GasFeeCap: f.MaxFee, Gas: f.GasLimit, To: &to, Value: value, Data: data})
	}
	return types.NewTx(&types.LegacyTx{Nonce: nonce, GasPrice: f.GasPrice, Gas: f.GasLimit, To: &to, Value: value, Data: data})
}

func minBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

func maxBig(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}
