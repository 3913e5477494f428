package relayer

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/riverqueue/river"

	"github.com/rflow-dev/rflow/store"
)

// minimumTTL is how long a network's minimum price, learned from a
// node's refusal, is paid by every send without asking: long enough that
// a burst is not refused send after send, short enough that a node whose
// operator lowered its limit is paid the market's price again soon (the
// first send after it is refused once if not).
const minimumTTL = 10 * time.Minute

// learned is the minimum price a node stated and when it last did.
type learned struct {
	price *big.Int
	at    time.Time
}

// learnMinimum records need as the least chainID's node takes (a tip; a
// legacy transaction's gas price), so the next sends start at it instead
// of being refused again.
func (r *Relayer) learnMinimum(chainID uint64, need *big.Int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.minimums[chainID]; ok && time.Since(l.at) < minimumTTL && l.price.Cmp(need) > 0 {
		need = l.price
	}
	r.minimums[chainID] = learned{price: new(big.Int).Set(need), at: time.Now()}
}

// minimumPrice is chainID's learned minimum price, or nil.
func (r *Relayer) minimumPrice(chainID uint64) *big.Int {
	min, _ := r.minimum(chainID)
	return min
}

// minimum is chainID's learned minimum price and how old it is, or nil.
func (r *Relayer) minimum(chainID uint64) (*big.Int, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.minimums[chainID]
	if !ok || time.Since(l.at) >= minimumTTL {
		return nil, 0
	}
	return l.price, time.Since(l.at)
}

// atLeast raises f to pay a tip (a legacy gas price) of at least min,
// keeping the room the max fee leaves for the base fee.
func (f fees) atLeast(min *big.Int) fees {
	switch {
	case min == nil:
	case f.dynamic() && f.Tip.Cmp(min) < 0:
		f.MaxFee = new(big.Int).Add(f.MaxFee, new(big.Int).Sub(min, f.Tip))
		f.Tip = new(big.Int).Set(min)
	case !f.dynamic() && f.GasPrice.Cmp(min) < 0:
		f.GasPrice = new(big.Int).Set(min)
	}
	return f
}

// offer is what f pays the node per gas above the base fee: the tip, or a
// legacy gas price.
func (f fees) offer() *big.Int {
	if f.dynamic() {
		return f.Tip
	}
	return f.GasPrice
}

// feesOfTx are the fees signed into tx.
func feesOfTx(tx *types.Transaction) fees {
	if tx.Type() == types.LegacyTxType || tx.Type() == types.AccessListTxType {
		return fees{GasLimit: tx.Gas(), GasPrice: tx.GasPrice()}
	}
	return fees{GasLimit: tx.Gas(), MaxFee: tx.GasFeeCap(), Tip: tx.GasTipCap()}
}

// capsOf are the caps of a send from w that has its nonce: the lower of
// the send's fee cap and the wallet's max_fee, and the wallet's tip cap.
func capsOf(w *Wallet, row *store.RelayerTx) feeCaps {
	return walletCaps(w, row.FeeCap)
}

// walletCaps are the caps of a send from w whose own fee cap is sendCap.
func walletCaps(w *Wallet, sendCap *big.Int) feeCaps {
	c := feeCaps{fee: sendCap, feeBy: "the send's fee cap", tip: w.MaxPriorityFee}
	if w.MaxFee != nil && (c.fee == nil || w.MaxFee.Cmp(c.fee) < 0) {
		c.fee, c.feeBy = w.MaxFee, "the wallet's max_fee"
	}
	return c
}

// short says why caps c cannot pay floor, the least the node takes: the
// price it stated, or (unstated non-nil) a bump above the unstated price
// it refused, when it said only "more".
func (c feeCaps) short(floor, unstated *big.Int, dynamic bool) string {
	what := "a tip"
	if !dynamic {
		what = "a gas price"
	}
	need := fmt.Sprintf("the node requires %s of at least %s wei", what, floor)
	if unstated != nil {
		need = fmt.Sprintf("the node requires %s above %s wei (it does not say how much)", what, unstated)
	}
	switch {
	case dynamic && c.tip != nil && c.tip.Cmp(floor) < 0:
		return fmt.Sprintf("%s; the wallet's max_priority_fee caps it at %s wei", need, c.tip)
	case c.fee != nil:
		return fmt.Sprintf("%s; %s caps the fee per gas at %s wei", need, c.feeBy, c.fee)
	}
	return need
}

// raised is what bytes refused for paying less than the node's minimum
// (refused) are re-signed with: a tip (a legacy gas price) of at least the
// minimum the node stated (need; nil when it stated none, or a number its
// refused bytes already pay: then at least percent more than they pay) or
// the market's if higher, the max fee raised as much, within caps c. When
// the caps cannot pay that minimum it returns why instead.
func raised(refused, now fees, need *big.Int, c feeCaps, percent int64) (fees, string) {
	floor, unstated := need, (*big.Int)(nil)
	if need == nil || need.Cmp(refused.offer()) <= 0 {
		unstated = refused.offer()
		floor = raisedBy(unstated, percent)
	}
	f := fees{GasLimit: refused.GasLimit}
	if refused.dynamic() {
		headroom := new(big.Int).Sub(refused.MaxFee, refused.Tip)
		f.Tip = floor
		if now.dynamic() {
			f.Tip = maxBig(floor, now.Tip)
			headroom = maxBig(headroom, new(big.Int).Sub(now.MaxFee, now.Tip))
		}
		f.MaxFee = new(big.Int).Add(f.Tip, headroom)
		if f = f.capped(c); f.Tip.Cmp(floor) < 0 {
			return fees{}, c.short(floor, unstated, true)
		}
		return f, ""
	}
	f.GasPrice = floor
	if now.GasPrice != nil {
		f.GasPrice = maxBig(floor, now.GasPrice)
	}
	if f = f.capped(c); f.GasPrice.Cmp(floor) < 0 {
		return fees{}, c.short(floor, unstated, false)
	}
	return f, ""
}

// shortOfMinimum says why a send about to get its nonce, to be signed
// with f within caps c, would pay less than its network's learned minimum
// (a node refused less within minimumTTL), or "" when it would not.
func (r *Relayer) shortOfMinimum(chainID uint64, f fees, c feeCaps) string {
	min, age := r.minimum(chainID)
	if min == nil || f.offer().Cmp(min) >= 0 {
		return ""
	}
	return fmt.Sprintf("%s (it refused less %s ago); nothing sent", c.short(min, nil, f.dynamic()), age.Round(time.Second))
}

// meetMinimum handles bytes of the send (kind "send", or "cancel" for its
// no-op) that the node refused for paying less than its own minimum price.
// Re-sending them would be refused forever, so they are re-signed at the
// same nonce at the price the node states (or, when it states none, a bump
// above the refused one), within the send's and the wallet's caps: the new
// fees and bytes are recorded before they are sent, and at one nonce only
// one of the send's transactions can ever be mined. When the caps cannot
// pay the node's price, the send ends with that reason (see refused): a
// send that never reached a mempool gives its nonce back, so the wallet's
// later sends are not held behind it.
func (r *Relayer) meetMinimum(ctx context.Context, job *river.Job[SendArgs], w *Wallet, b Backend, row *store.RelayerTx, kind string,
	signed *types.Transaction, sendErr error) error {
	now, err := r.market(ctx, uint64(row.ChainID), b, signed.Gas())
	if err != nil {
		return r.later(ctx, row.TxID, job.ID, err)
	}
	next, short := raised(feesOfTx(signed), now, statedMinimum(sendErr), capsOf(w, row), r.cfg.BumpPercent)
	if short != "" {
		return r.refused(ctx, job, b, row, signed, sendTipTooLow, fmt.Errorf("%s (node: %w)", short, sendErr))
	}
	if kind == "send" {
		if err := store.SetRelayerTxFees(ctx, r.cfg.Pool, row.TxID, job.ID, next.row()); err != nil {
			return err
		}
	}
	resigned, err := r.signRecord(ctx, w, row, kind, next)
	if err != nil {
		return err
	}
	r.fault("relayer.before-resend-at-minimum")
	r.log.Info("re-signed at the node's minimum price", "external_id", row.ExternalID, "kind", kind, "nonce", *row.Nonce,
		"refused_hash", signed.Hash(), "hash", resigned.Hash(), "offer", next.offer(), "max_fee", next.price())
	// Refused again (the node raised its price meanwhile, or states none),
	// the next poll raises again: one re-signing per poll, each paying
	// more, up to the caps.
	reclaimed, stop, err := r.admit(ctx, job, row, kind)
	if stop {
		return err
	}
	class, sendErr := r.send(ctx, b, resigned)
	if class.permanent() {
		return r.refused(ctx, job, b, row, resigned, class, sendErr)
	}
	if err := r.recordAfter(ctx, job.ID, row, resigned.Hash(), class, sendErr, reclaimed); err != nil {
		return err
	}
	return river.JobSnooze(r.cfg.PollInterval)
}
