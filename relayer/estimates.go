package relayer

import (
	"context"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// maxEstimates caps the eth_estimateGas calls that share one request.
const maxEstimates = 64

// estimateCall is one send's eth_estimateGas on its way to the node.
type estimateCall struct {
	msg ethereum.CallMsg
	gas uint64
	err error
}

// estimateGas is b.EstimateGas, except that concurrent calls on one
// network go to a node that takes batches together (Relayer.estimates): a
// call that finds no request out goes at once (alone, or with whatever
// waits), and calls that come while one is out wait for it and go in the
// next. A burst of first broadcasts then costs a few requests instead of
// one per send, and a lone send waits for nothing. Each estimate is still
// its own call against the node's latest state, answered (or refused, or
// reverted) on its own.
func (r *Relayer) estimateGas(ctx context.Context, b Backend, chainID uint64, msg ethereum.CallMsg) (uint64, error) {
	bc := r.batchOf(b, chainID)
	if bc == nil {
		return b.EstimateGas(ctx, msg)
	}
	c := &estimateCall{msg: msg}
	r.estimates.join(chainID, c, maxEstimates, func(calls []*estimateCall) { estimateAll(ctx, b, bc, calls) })
	return c.gas, c.err
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
