package units

import (
	"fmt"
	"math/big"
)

// Default native currency: what a network without currency: pays in.
const (
	DefaultSymbol   = "ETH"
	DefaultDecimals = 18
	// Wei names the smallest unit of an 18-decimal native currency.
	Wei = "wei"
)

// Unit is how the amounts of one asset are shown: a symbol, the decimals
// that scale the chain's integers to it, and the name of the raw integer's
// unit (Base: "wei" for a native currency; "" for a token, whose raw
// integer stands alone).
//
// A Unit with no Symbol is an asset whose decimals are not known (an
// ERC-20 contract without token: in the project file): its amounts show
// as the raw integer and Base alone, never scaled by a guess.
type Unit struct {
	Symbol   string `json:"symbol,omitempty"`
	Decimals int    `json:"decimals"`
	Base     string `json:"base,omitempty"`
}

// Ether is the default native currency: ETH, 18 decimals, in wei.
func Ether() Unit { return Native(DefaultSymbol, DefaultDecimals) }

// Native is a network's currency; its raw integer is in wei when it has
// 18 decimals, as every EVM chain's is.
func Native(symbol string, decimals int) Unit {
	u := Unit{Symbol: symbol, Decimals: decimals}
	if decimals == DefaultDecimals {
		u.Base = Wei
	}
	return u
}

// Token is an ERC-20 token's unit, from its symbol and decimals.
func Token(symbol string, decimals int) Unit { return Unit{Symbol: symbol, Decimals: decimals} }

// Unknown is the unit of an asset whose decimals are not known: its
// amounts show as raw integers "in base units of name".
func Unknown(name string) Unit { return Unit{Base: "base units of " + name} }

// Known reports whether u scales amounts (it has a symbol).
func (u Unit) Known() bool { return u.Symbol != "" }

// Format is v for a person: in the unit, grouped, with the raw integer
// beside it: "0.0292 ETH (29200000000000000 wei)",
// "1,250.5 USDC (1250500000)". The raw integer is left out where it
// would only repeat the digits shown (zero, or a unit of 0 decimals under
// 1,000); an unknown unit shows the raw integer alone:
// "1500000 base units of USDC".
func (u Unit) Format(v *big.Int) string {
	if v == nil {
		v = new(big.Int)
	}
	if !u.Known() {
		return v.String() + " " + u.Base
	}
	shown := u.Amount(v)
	raw := v.String()
	if v.Sign() == 0 || u.Decimals == 0 && len(raw) <= 3 {
		return shown
	}
	if u.Base != "" {
		raw += " " + u.Base
	}
	return fmt.Sprintf("%s (%s)", shown, raw)
}

// Amount is v in the unit without the raw integer ("0.0292 ETH"), for
// columns that carry the raw value elsewhere; an unknown unit gives the
// raw integer and Base, as Format does.
func (u Unit) Amount(v *big.Int) string {
	if v == nil {
		v = new(big.Int)
	}
	if !u.Known() {
		return v.String() + " " + u.Base
	}
	return Grouped(v, u.Decimals) + " " + u.Symbol
}

// FormatText is Format for an integer held as decimal text (how journals
// and summaries store amounts); text that is not an integer is returned
// as it is, so a display never fails on what it was given.
func (u Unit) FormatText(s string) string {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return s
	}
	return u.Format(v)
}

// Label is how a table header or an asset column names the unit: its
// symbol, or its Base for an unknown one.
func (u Unit) Label() string {
	if u.Known() {
		return u.Symbol
	}
	return u.Base
}
