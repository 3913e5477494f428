package relayer

import (
	"context"
	"slices"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// maxEstimates caps the eth_estimateGas calls that share one request.
const maxEstimates = 64

// estimateCall is one send's eth_estimateGas on its way to the node.
type estimateCall struct {
	msg  ethereum.CallMsg
	gas  uint64
	err  error
	lead chan bool // true: lead the next request; false: gas and err are set
}

// estimateQueue is the estimates of one network waiting for a request;
// busy while one is out. Guarded by Relayer.mu.
type estimateQueue struct {
	busy    bool
	waiting []*estimateCall
}

// estimateGas is b.EstimateGas, except that concurrent calls on one
// network go to a node that takes batches together: a call that finds no
// request out goes at once (alone, or with whatever waits), and calls that
// come while one is out wait for it and go in the next. A burst of first
// broadcasts then costs a few requests instead of one per send, and a lone
// send waits for nothing. Each estimate is still its own call against the
// node's latest state, answered (or refused, or reverted) on its own.
func (r *Relayer) estimateGas(ctx context.Context, b Backend, chainID uint64, msg ethereum.CallMsg) (uint64, error) {
	bc := r.batchOf(b, chainID)
	if bc == nil {
		return b.EstimateGas(ctx, msg)
	}
	c := &estimateCall{msg: msg, lead: make(chan bool, 1)}
	r.mu.Lock()
	q := r.estimates[chainID]
	if q == nil {
		q = &estimateQueue{}
		r.estimates[chainID] = q
	}
	q.waiting = append(q.waiting, c)
	lead := !q.busy
	q.busy = true
	r.mu.Unlock()
	// A waiting call waits whatever its context, as a batch of sends does:
	// the request is short, and the leader's context bounds it.
	if lead || <-c.lead {
		r.leadEstimates(ctx, b, bc, chainID, q)
	}
	return c.gas, c.err
}

// leadEstimates sends the estimates waiting in q (the leader's own first)
// in one request, hands the lead to the first call still waiting, and
// wakes the others with their answers.
func (r *Relayer) leadEstimates(ctx context.Context, b Backend, bc batchCaller, chainID uint64, q *estimateQueue) {
	r.mu.Lock()
	n := min(len(q.waiting), maxEstimates)
	calls := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	r.mu.Unlock()
	estimateAll(ctx, b, bc, calls)
	r.mu.Lock()
	if len(q.waiting) > 0 {
		q.waiting[0].lead <- true
	} else {
		q.busy = false
		delete(r.estimates, chainID)
	}
	r.mu.Unlock()
	for _, c := range calls[1:] {
		c.lead <- false
	}
}

// estimateAll answers calls in one request, or one by one when there is
// one call or the node refuses the request whole (a provider that takes
// no batches).
func estimateAll(ctx context.Context, b Backend, bc batchCaller, calls []*estimateCall) {
	oneByOne := func() {
		for _, c := range calls {
			c.gas, c.err = b.EstimateGas(ctx, c.msg)
		}
	}
	if len(calls) == 1 {
		oneByOne()
		return
	}
	gas := make([]hexutil.Uint64, len(calls))
	elems := make([]rpc.BatchElem, len(calls))
	for i, c := range calls {
		elems[i] = rpc.BatchElem{Method: "eth_estimateGas", Args: []any{callArg(c.msg)}, Result: &gas[i]}
	}
	if err := bc.BatchCallContext(ctx, elems); err != nil {
		oneByOne()
		return
	}
	for i, c := range calls {
		c.gas, c.err = uint64(gas[i]), elems[i].Error
	}
}

// callArg is the call object of eth_estimateGas for msg, as go-ethereum's
// ethclient writes it for the fields a send's simulation sets.
func callArg(msg ethereum.CallMsg) map[string]any {
	arg := map[string]any{"from": msg.From, "to": msg.To}
	if len(msg.Data) > 0 {
		arg["input"] = hexutil.Bytes(msg.Data)
	}
	if msg.Value != nil {
		arg["value"] = (*hexutil.Big)(msg.Value)
	}
	return arg
}
