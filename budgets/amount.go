package budgets

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/rflow-dev/rflow/workflow"
)

// Native is the asset of a budget on the chain's own currency.
const Native = "native"

// Amount is what a send takes from budget b: its value for a native budget,
// the amount argument of transfer/transferFrom (decoded from the calldata,
// so it is exactly what the chain sees) for an ERC-20 budget.
func Amount(b workflow.BudgetRef, s *workflow.Send, value *big.Int, data []byte) (*big.Int, error) {
	if b.Asset == Native {
		if value == nil {
			return new(big.Int), nil
		}
		return new(big.Int).Set(value), nil
	}
	if s.Contract != b.Asset || s.ABIMethod == nil || (s.Function != "transfer" && s.Function != "transferFrom") {
		return nil, fmt.Errorf("budget %s counts %s transfers: the send must call %s.transfer or %s.transferFrom", b.Name, b.Asset, b.Asset, b.Asset)
	}
	if len(data) < 4 {
		return nil, errors.New("budget " + b.Name + ": the send has no calldata")
	}
	args, err := s.ABIMethod.Inputs.Unpack(data[4:])
	if err != nil {
		return nil, fmt.Errorf("budget %s: decode %s arguments: %w", b.Name, s.Function, err)
	}
	// transfer(to, amount) and transferFrom(from, to, amount): the amount is
	// the last argument.
	var amt *big.Int
	if len(args) > 0 {
		amt, _ = args[len(args)-1].(*big.Int)
	}
	if amt == nil {
		return nil, fmt.Errorf("budget %s: %s has no integer amount argument", b.Name, s.Function)
	}
	return amt, nil
}
