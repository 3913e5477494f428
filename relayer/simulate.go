package relayer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// Simulation is what eth_estimateGas and eth_call say a send would do. A
// revert is a result, not an error: Reverted is set and RevertReason holds
// the decoded Error(string) / Panic(uint256) reason, or the raw selector of a
// custom error.
type Simulation struct {
	GasEstimate  uint64        `json:"gas_estimate,omitempty"`
	Reverted     bool          `json:"reverted"`
	RevertReason string        `json:"revert_reason,omitempty"`
	RevertData   hexutil.Bytes `json:"revert_data,omitempty"`
	ReturnData   hexutil.Bytes `json:"return_data,omitempty"`
	// Error is a non-revert refusal that no retry fixes, such as the
	// wallet not holding value + gas.
	Error string `json:"error,omitempty"`
}

// Failed reports whether the send would not go through.
func (s *Simulation) Failed() bool { return s.Reverted || s.Error != "" }

// Reason says why a failed simulation failed.
func (s *Simulation) Reason() string {
	switch {
	case s.Reverted && s.RevertReason != "":
		return "execution reverted: " + s.RevertReason
	case s.Reverted:
		return "execution reverted"
	}
	return s.Error
}

// Simulate runs req against the chain's latest state without sending
// anything: eth_estimateGas for the gas and a revert, then eth_call for the
// return data. It returns an error only when the node could not answer
// (retry later); a revert comes back as a Simulation with Reverted set.
func (r *Relayer) Simulate(ctx context.Context, req Request) (*Simulation, error) {
	w, b, err := r.resolve(req.Wallet, req.ChainID)
	if err != nil {
		return nil, err
	}
	msg := ethereum.CallMsg{From: w.Address(), To: &req.To, Value: req.Value, Data: req.Data}
	sim, err := r.estimate(ctx, b, req.ChainID, msg)
	if err != nil || sim.Failed() {
		return sim, err
	}
	out, err := b.CallContract(ctx, msg, nil)
	if err != nil {
		if s, ok := revertOf(err); ok {
			return s, nil
		}
		return nil, fmt.Errorf("eth_call: %w", err)
	}
	sim.ReturnData = out
	return sim, nil
}

// estimate runs eth_estimateGas (see estimateGas) and sorts its error: a
// revert or a refusal no retry fixes becomes a failed Simulation, anything
// else an error.
func (r *Relayer) estimate(ctx context.Context, b Backend, chainID uint64, msg ethereum.CallMsg) (*Simulation, error) {
	gas, err := r.estimateGas(ctx, b, chainID, msg)
	if err == nil {
		return &Simulation{GasEstimate: gas}, nil
	}
	if s, ok := revertOf(err); ok {
		return s, nil
	}
	if classifySend(err).permanent() {
		return &Simulation{Error: err.Error()}, nil
	}
	return nil, fmt.Errorf("eth_estimateGas: %w", err)
}

// revertOf recognises an execution revert in a JSON-RPC error and decodes
// its reason from the error data.
func revertOf(err error) (*Simulation, bool) {
	var de rpc.DataError
	var data []byte
	if errors.As(err, &de) {
		if s, ok := de.ErrorData().(string); ok {
			if b, derr := hexutil.Decode(s); derr == nil {
				data = b
			}
		}
	}
	msg := strings.ToLower(err.Error())
	if data == nil && !strings.Contains(msg, "revert") {
		return nil, false
	}
	s := &Simulation{Reverted: true, RevertData: data}
	if reason, uerr := abi.UnpackRevert(data); uerr == nil {
		s.RevertReason = reason
	} else if len(data) >= 4 {
		s.RevertReason = "custom error 0x" + hex.EncodeToString(data[:4])
	} else if _, after, ok := strings.Cut(err.Error(), "execution reverted: "); ok {
		s.RevertReason = after
	}
	return s, true
}
