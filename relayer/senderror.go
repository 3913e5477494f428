package relayer

import (
	"math/big"
	"regexp"
	"strings"
)

// sendClass is what an eth_sendRawTransaction error means for the relayer.
type sendClass int

const (
	// sendOK: the node accepted the transaction.
	sendOK sendClass = iota
	// sendKnown: the node already has this exact transaction; as good as OK.
	sendKnown
	// sendNonceTooLow: the nonce is already used on chain, by this send (an
	// earlier hash was mined) or by someone else (heal: take a new nonce).
	sendNonceTooLow
	// sendUnderpriced: another transaction holds the nonce in the mempool and
	// ours does not pay enough more to replace it ("replacement transaction
	// underpriced"); bump and retry.
	sendUnderpriced
	// sendInsufficientFunds: the wallet cannot pay value + gas (go-ethereum's
	// core.ErrInsufficientFunds). Bytes the node refuses for it are not in
	// its mempool: see refused.
	sendInsufficientFunds
	// sendRejected: the node refuses these bytes for a reason no re-send
	// of them fixes (intrinsic gas too low, a bad signature or chain id, a
	// gas limit above the block's). Handled like insufficient funds.
	sendRejected
	// sendFeeTooLow: the fee cap of these bytes is below the base fee of
	// the node's next block (a reorg can bring a chain whose base fee is
	// higher). Re-sending them is refused again until the base fee falls;
	// a re-signed copy at the same nonce with market fees is not.
	sendFeeTooLow
	// sendTipTooLow: the node's own minimum price is above what these bytes
	// pay (geth's --txpool.pricelimit: "transaction gas price below
	// minimum: gas tip cap 1, minimum needed 1000"; Polygon's 25 gwei).
	// Re-sending them is refused forever; a copy re-signed at the same
	// nonce at the price the node states (see statedMinimum) is not.
	sendTipTooLow
	// sendTransient: anything else (timeouts, rate limits, unknown errors).
	// The outcome is ambiguous, so the same signed bytes are sent again
	// later, which is safe: they have one hash.
	sendTransient
)

func (c sendClass) String() string {
	switch c {
	case sendOK:
		return "ok"
	case sendKnown:
		return "already known"
	case sendNonceTooLow:
		return "nonce too low"
	case sendUnderpriced:
		return "replacement underpriced"
	case sendInsufficientFunds:
		return "insufficient funds"
	case sendRejected:
		return "rejected"
	case sendFeeTooLow:
		return "fee cap below base fee"
	case sendTipTooLow:
		return "tip below the node's minimum"
	}
	return "transient"
}

// classifySend sorts a send error by the node's message. JSON-RPC nodes share
// no error codes for these, so the wording (geth's, which anvil, reth and
// most providers follow) is the contract.
func classifySend(err error) sendClass {
	if err == nil {
		return sendOK
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "already known"), strings.Contains(msg, "known transaction"),
		strings.Contains(msg, "already imported"), strings.Contains(msg, "alreadyknown"),
		strings.Contains(msg, "already exists"):
		return sendKnown
	case strings.Contains(msg, "nonce too low"), strings.Contains(msg, "nonce has already been used"),
		strings.Contains(msg, "noncetoolow"), strings.Contains(msg, "invalid nonce"):
		return sendNonceTooLow
	// Below the node's own price: geth's and its forks', reth's, Besu's;
	// "transaction underpriced" without "replacement" is geth 1.13's and
	// Nethermind's (and a full pool's: its cheapest is the price then).
	case strings.Contains(msg, "gas price below minimum"), strings.Contains(msg, "below configured minimum"),
		strings.Contains(msg, "below minimum required priority fee"),
		strings.Contains(msg, "underpriced") && !strings.Contains(msg, "replacement"):
		return sendTipTooLow
	case strings.Contains(msg, "underpriced"):
		return sendUnderpriced
	case strings.Contains(msg, "less than block base fee"), strings.Contains(msg, "fee cap less than base fee"),
		strings.Contains(msg, "feecaptoolow"), strings.Contains(msg, "max fee per gas too low"):
		return sendFeeTooLow
	case strings.Contains(msg, "insufficient funds"), strings.Contains(msg, "insufficient balance"),
		strings.Contains(msg, "insufficientfunds"):
		return sendInsufficientFunds
	// Refusals no re-send of the same bytes fixes (geth's core and txpool
	// wording, and the spellings of anvil and reth).
	case strings.Contains(msg, "intrinsic gas too low"), strings.Contains(msg, "intrinsic gas exceeds gas limit"),
		strings.Contains(msg, "floor data gas"),
		strings.Contains(msg, "invalid sender"), strings.Contains(msg, "invalid signature"),
		strings.Contains(msg, "invalid chain id"), strings.Contains(msg, "invalid chainid"),
		strings.Contains(msg, "chain id mismatch"), strings.Contains(msg, "incorrect chain id"),
		strings.Contains(msg, "only replay-protected"),
		strings.Contains(msg, "exceeds block gas limit"), strings.Contains(msg, "gas limit too high"),
		strings.Contains(msg, "oversized data"), strings.Contains(msg, "type not supported"),
		strings.Contains(msg, "tip higher than fee cap"), strings.Contains(msg, "max priority fee per gas higher than max fee per gas"):
		return sendRejected
	}
	return sendTransient
}

// permanent reports whether the node refused the bytes for good: re-sending
// them can only be refused again.
func (c sendClass) permanent() bool { return c == sendInsufficientFunds || c == sendRejected }

// minimumNeeded finds the price a node says it needs in its refusal:
// geth's "gas tip cap 1, minimum needed 1000" (1.14 on, and Polygon's and
// BNB Chain's forks of it), geth 1.13's "tip needed 1000, tip permitted 1"
// and reth's "below minimum required priority fee 1000".
var minimumNeeded = regexp.MustCompile(`(?:minimum needed|tip needed|minimum required priority fee):? (\d{1,78})\b`)

// statedMinimum is the minimum tip (a legacy transaction's gas price) in
// wei that a tip refusal states, or nil when it states none.
func statedMinimum(err error) *big.Int {
	if err == nil {
		return nil
	}
	m := minimumNeeded.FindStringSubmatch(strings.ToLower(err.Error()))
	if m == nil {
		return nil
	}
	n, ok := new(big.Int).SetString(m[1], 10)
	if !ok {
		return nil
	}
	return n
}
