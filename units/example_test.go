package units_test

import (
	"fmt"
	"math/big"

	"github.com/rflow-dev/rflow/units"
)

// A native amount reads in the network's currency with the wei beside it;
// a token amount in its own decimals; a token whose decimals the project
// does not declare stays a raw integer.
func ExampleUnit_Format() {
	fmt.Println(units.Ether().Format(big.NewInt(29200000000000000)))
	fmt.Println(units.Token("USDC", 6).Format(big.NewInt(1250500000)))
	fmt.Println(units.Unknown("Vault").Format(big.NewInt(1500000)))
	// Output:
	// 0.0292 ETH (29200000000000000 wei)
	// 1,250.5 USDC (1250500000)
	// 1500000 base units of Vault
}

// Decimal and Parse are exact inverses, with no grouping: the text
// format_units returns in expressions.
func ExampleDecimal() {
	v, _ := units.Parse("0.0292", 18)
	fmt.Println(v, units.Decimal(v, 18))
	// Output:
	// 29200000000000000 0.0292
}
