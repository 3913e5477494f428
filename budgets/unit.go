package budgets

import "github.com/rflow-dev/rflow/units"

// Unit is what a budget on asset shows its amounts in: the unit it was
// declared with (workflow.BudgetRef.Unit), else, for a row or a reference
// that carries none, ETH for a native budget and raw integers for a token.
func Unit(asset string, declared units.Unit) units.Unit {
	switch {
	case declared != units.Unit{}:
		return declared
	case asset == Native:
		return units.Ether()
	}
	return units.Unknown(asset)
}
